package ai.dynaspa;

/** A model that cannot be opened or run: the message says what is wrong. */
public class DynaspaException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public DynaspaException(String message) {
        super(message);
    }
}
