package ai.dynaspa;

/** A model that cannot be opened or run: the message says what is wrong. */
public class DynaspaException extends RuntimeException {
    public DynaspaException(String message) {
        super(message);
    }
}
