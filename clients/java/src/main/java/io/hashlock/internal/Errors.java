package io.hashlock.internal;

import io.hashlock.CrossSlotException;
import io.hashlock.HashlockException;
import io.hashlock.ModuleNotLoadedException;
import io.hashlock.NoReplicasException;
import io.hashlock.NoUpgradeException;
import io.hashlock.NotLatchException;
import io.hashlock.NotLockException;
import io.hashlock.NotOwnerException;
import io.hashlock.NotSemaphoreException;
import io.hashlock.ServerErrorException;
import io.hashlock.WrongTypeException;
import java.util.Locale;

/** One place that turns error replies into hashlock's exceptions. */
public final class Errors {
    private Errors() {}

    public static HashlockException of(Resp.ErrorReply e) {
        String m = e.message();
        switch (e.code()) {
            case "NOTOWNER":
                return new NotOwnerException(m);
            case "NOTLOCK":
                return new NotLockException(m);
            case "WRONGTYPE":
                return new WrongTypeException(m);
            case "NOREPLICAS":
                return new NoReplicasException(m);
            case "NOUPGRADE":
                return new NoUpgradeException(m);
            case "NOTSEMAPHORE":
                return new NotSemaphoreException(m);
            case "NOTLATCH":
                return new NotLatchException(m);
            case "CROSSSLOT":
                return new CrossSlotException(m);
            default:
                break;
        }
        String lower = m.toLowerCase(Locale.ROOT);
        if (lower.startsWith("err unknown command")
                && (lower.contains("lock.") || lower.contains("semaphore.") || lower.contains("latch."))) {
            return new ModuleNotLoadedException(m); // LOCK.*, RWLOCK.*, SEMAPHORE.*, LATCH.*
        }
        return new ServerErrorException(m);
    }

    /** The reply, or the exception its error stands for. */
    public static Object check(Object reply) {
        if (reply instanceof Resp.ErrorReply e) throw of(e);
        return reply;
    }
}
