package ai.dynaspa;

/** What the last frame of a {@link Session} did. */
public final class Report {
    /** Wall time of the whole frame, in milliseconds. */
    public final double latencyMs;
    /** Mean mask density (active fraction) over the ops that ran sparse; -1 when none did. */
    public final double density;
    /** Ops that ran sparse. */
    public final int sparseOps;
    /** Time spent in sparse ops, in milliseconds. */
    public final double sparseMs;

    Report(double latencyMs, double density, int sparseOps, double sparseMs) {
        this.latencyMs = latencyMs;
        this.density = density;
        this.sparseOps = sparseOps;
        this.sparseMs = sparseMs;
    }

    @Override
    public String toString() {
        return String.format("%.3f ms, density %.3f, %d sparse ops", latencyMs, density, sparseOps);
    }
}
