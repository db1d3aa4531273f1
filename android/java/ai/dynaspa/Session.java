package ai.dynaspa;

import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.Objects;

/**
 * A model opened on a backend. Inputs and outputs are float32 in C order, in the order of
 * {@link #inputShape} and {@link #outputShape}. Methods are synchronized, so a session may be
 * shared between threads (frames run one at a time); separate sessions run concurrently.
 *
 * <pre>
 * try (Session s = Session.open("model.onnx", "cpu")) {
 *     float[][] out = s.run(frame);             // frame: float[] of inputShape(0)'s size
 *     Report r = s.lastReport();                // latency, mask density
 * }
 * </pre>
 *
 * The native library is libdynaspa_ffi (System.loadLibrary), or the file the system property
 * {@code dynaspa.library} names.
 */
public final class Session implements AutoCloseable {
    static {
        String path = System.getProperty("dynaspa.library");
        if (path != null) {
            System.load(path);
        } else {
            System.loadLibrary("dynaspa_ffi");
        }
    }

    /** Options of {@link Session#open(String, String, Options)}; the defaults as in C. */
    public static final class Options {
        /** CPU worker threads; 0: every core. */
        public int threads = 0;
        /** Inactive outputs of sparse ops keep the last frame's values (SIGE's cached mode). */
        public boolean cachedFill = false;
        /** Run every op densely. */
        public boolean dense = false;
        /** A tuned profile file; null: the one shipped for this device and model, if any. */
        public String profile = null;
        /** Use no profile: calibrate the sparse ops at open. */
        public boolean noProfile = false;
        /** GPU backends: the device (index or name); null: the default. */
        public String device = null;
        /** Where calibrated kernels are cached (e.g. Context.getCacheDir()); null: default. */
        public String cacheDir = null;
    }

    private long handle;
    private final long[][] inputShapes;
    private final long[][] outputShapes;

    private Session(long handle) {
        this.handle = handle;
        inputShapes = new long[nativeCount(handle, false)][];
        for (int i = 0; i < inputShapes.length; i++) inputShapes[i] = nativeShape(handle, false, i);
        outputShapes = new long[nativeCount(handle, true)][];
        for (int j = 0; j < outputShapes.length; j++) outputShapes[j] = nativeShape(handle, true, j);
    }

    /** Opens the ONNX model at {@code modelPath} on {@code backend} ("auto", "cpu", "cuda", "opencl", "wgpu"). */
    public static Session open(String modelPath, String backend) {
        return open(modelPath, backend, new Options());
    }

    public static Session open(String modelPath, String backend, Options o) {
        Objects.requireNonNull(o, "options");
        long h = nativeOpen(modelPath, backend, o.threads, o.cachedFill, o.dense, o.profile, o.noProfile, o.device, o.cacheDir);
        try {
            return new Session(h);
        } catch (RuntimeException e) {
            nativeClose(h);
            throw e;
        }
    }

    public int inputCount() {
        return inputShapes.length;
    }

    public int outputCount() {
        return outputShapes.length;
    }

    public long[] inputShape(int index) {
        return inputShapes[index].clone();
    }

    public long[] outputShape(int index) {
        return outputShapes[index].clone();
    }

    public synchronized String inputName(int index) {
        return nativeName(live(), false, index);
    }

    public synchronized String outputName(int index) {
        return nativeName(live(), true, index);
    }

    /** Elements of a shape. */
    public static int elements(long[] shape) {
        long n = 1;
        for (long d : shape) n *= d;
        return Math.toIntExact(n);
    }

    /** Runs one frame; returns the outputs, newly allocated. */
    public synchronized float[][] run(float[]... inputs) {
        float[][] outputs = new float[outputShapes.length][];
        for (int j = 0; j < outputs.length; j++) outputs[j] = new float[elements(outputShapes[j])];
        run(inputs, outputs);
        return outputs;
    }

    /** Runs one frame into caller-allocated outputs (each of its shape's element count). */
    public synchronized void run(float[][] inputs, float[][] outputs) {
        nativeRunArrays(live(), inputs, outputs);
    }

    /**
     * Runs one frame on direct buffers in native byte order (no copy of the outputs through the
     * Java heap): each buffer's capacity must be its shape's element count.
     */
    public synchronized void run(FloatBuffer[] inputs, FloatBuffer[] outputs) {
        checkOrder(inputs, "inputs");
        checkOrder(outputs, "outputs");
        nativeRunBuffers(live(), inputs, outputs);
    }

    /** What the last frame did. */
    public synchronized Report lastReport() {
        double[] r = nativeReport(live());
        return new Report(r[0], r[1], (int) r[2], r[3]);
    }

    @Override
    public synchronized void close() {
        if (handle != 0) {
            long h = handle;
            handle = 0;
            nativeClose(h);
        }
    }

    private long live() {
        if (handle == 0) throw new IllegalStateException("the session is closed");
        return handle;
    }

    private static void checkOrder(FloatBuffer[] buffers, String what) {
        if (buffers == null) return; // the native side names the null
        for (int i = 0; i < buffers.length; i++) {
            if (buffers[i] != null && buffers[i].order() != ByteOrder.nativeOrder()) {
                throw new IllegalArgumentException(what + "[" + i + "] is not in native byte order");
            }
        }
    }

    private static native long nativeOpen(String modelPath, String backend, int threads, boolean cachedFill, boolean dense,
                                          String profile, boolean noProfile, String device, String cacheDir);
    private static native void nativeClose(long handle);
    private static native int nativeCount(long handle, boolean output);
    private static native String nativeName(long handle, boolean output, int index);
    private static native long[] nativeShape(long handle, boolean output, int index);
    private static native void nativeRunArrays(long handle, float[][] inputs, float[][] outputs);
    private static native void nativeRunBuffers(long handle, FloatBuffer[] inputs, FloatBuffer[] outputs);
    private static native double[] nativeReport(long handle);
}
