package io.hashlock;

/** The server does not know {@code LOCK.*}: the hashlock module is not loaded there. */
public class ModuleNotLoadedException extends ServerErrorException {
    private static final long serialVersionUID = 1L;

    public ModuleNotLoadedException(String serverMessage) {
        super("the hashlock module is not loaded on this server (load it with --loadmodule "
                + "/path/to/libhashlock.so or MODULE LOAD); the server said: " + serverMessage);
    }
}
