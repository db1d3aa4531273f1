import ai.dynaspa.DynaspaException;
import ai.dynaspa.Report;
import ai.dynaspa.Session;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * Driven by android/tests/java.rs: opens MODEL through ai.dynaspa.Session, runs the raw float32
 * frame INPUT through the float[] and the direct FloatBuffer paths and on two threads at once,
 * writes the outputs as OUT_DIR/{arrays,buffers}_J.f32 (native order), and checks that bad
 * arguments throw. Exits non-zero on any failure.
 *
 *   java -Ddynaspa.library=LIB -cp CLASSES RunModel MODEL CACHE_DIR INPUT OUT_DIR
 */
public final class RunModel {
    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static <T extends Throwable> void expectThrows(Class<T> type, String words, Runnable r) {
        try {
            r.run();
        } catch (Throwable t) {
            check(type.isInstance(t), "expected " + type.getSimpleName() + ", got " + t);
            for (String w : words.split("\\|")) {
                check(String.valueOf(t.getMessage()).contains(w), "message '" + t.getMessage() + "' does not name '" + w + "'");
            }
            return;
        }
        throw new AssertionError("expected " + type.getSimpleName() + " (" + words + ")");
    }

    static float[] readFloats(Path p) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(p)).order(ByteOrder.nativeOrder());
        float[] v = new float[b.remaining() / 4];
        b.asFloatBuffer().get(v);
        return v;
    }

    static void writeFloats(Path p, float[] v) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(4 * v.length).order(ByteOrder.nativeOrder());
        b.asFloatBuffer().put(v);
        Files.write(p, b.array());
    }

    static FloatBuffer direct(int n) {
        return ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder()).asFloatBuffer();
    }

    public static void main(String[] args) throws Exception {
        String model = args[0];
        Path out = Path.of(args[3]);
        Session.Options o = new Session.Options();
        o.threads = 2;
        o.noProfile = true;
        o.cacheDir = args[1];
        float[] input = readFloats(Path.of(args[2]));

        try (Session s = Session.open(model, "cpu", o)) {
            check(s.inputCount() == 1, "one input");
            check(Arrays.equals(s.inputShape(0), new long[] {1, 3, 72, 96}), "input shape " + Arrays.toString(s.inputShape(0)));
            check(s.inputName(0).equals("input"), "input name " + s.inputName(0));
            check(s.outputName(0).equals("logits"), "output name " + s.outputName(0));
            check(Arrays.equals(s.outputShape(0), new long[] {1, 10}), "output shape");

            float[][] arrays = s.run(input);
            Report r = s.lastReport();
            check(r.latencyMs > 0 && r.sparseOps > 0 && r.density > 0 && r.density <= 1, "report " + r);
            System.out.println("report: " + r);

            FloatBuffer[] ins = {direct(input.length)};
            ins[0].put(input);
            FloatBuffer[] outs = new FloatBuffer[s.outputCount()];
            for (int j = 0; j < outs.length; j++) {
                outs[j] = direct(Session.elements(s.outputShape(j)));
                for (int k = 0; k < outs[j].capacity(); k++) outs[j].put(k, Float.NaN);
            }
            s.run(ins, outs);
            for (int j = 0; j < outs.length; j++) {
                float[] v = new float[outs[j].capacity()];
                outs[j].get(0, v);
                writeFloats(out.resolve("arrays_" + j + ".f32"), arrays[j]);
                writeFloats(out.resolve("buffers_" + j + ".f32"), v);
            }

            // Bad arguments throw, naming what is wrong; the session still runs afterwards.
            float[] shortInput = Arrays.copyOf(input, input.length - 1);
            expectThrows(IllegalArgumentException.class, "20735|20736", () -> s.run(shortInput));
            expectThrows(NullPointerException.class, "inputs[0]", () -> s.run(new float[][] {null}, new float[9][]));
            expectThrows(IllegalArgumentException.class, "direct", () -> s.run(new FloatBuffer[] {FloatBuffer.allocate(input.length)}, outs));
            float[] nan = input.clone();
            nan[5] = Float.NaN;
            expectThrows(IllegalArgumentException.class, "NaN", () -> s.run(nan));
            check(Arrays.equals(s.run(input)[0], arrays[0]), "a run after errors matches");
        }
        expectThrows(DynaspaException.class, "/nonexistent.onnx", () -> Session.open("/nonexistent.onnx", "cpu"));
        expectThrows(DynaspaException.class, "unknown backend 'tpu'", () -> Session.open(model, "tpu"));
        expectThrows(NullPointerException.class, "modelPath", () -> Session.open(null, "cpu"));
        Session closed = Session.open(model, "cpu", o);
        closed.close();
        closed.close();
        expectThrows(IllegalStateException.class, "closed", () -> closed.run(input));

        // Two sessions on two threads at once, each matching the single run.
        float[] want = readFloats(out.resolve("arrays_0.f32"));
        Throwable[] failed = new Throwable[1];
        Thread[] threads = new Thread[2];
        for (int t = 0; t < threads.length; t++) {
            threads[t] = new Thread(() -> {
                try (Session s = Session.open(model, "cpu", o)) {
                    for (int k = 0; k < 5; k++) check(Arrays.equals(s.run(input)[0], want), "threaded run differs");
                } catch (Throwable e) {
                    synchronized (failed) {
                        failed[0] = e;
                    }
                }
            });
            threads[t].start();
        }
        for (Thread t : threads) t.join();
        if (failed[0] != null) throw new AssertionError("a thread failed", failed[0]);
        System.out.println("java: ok");
    }
}
