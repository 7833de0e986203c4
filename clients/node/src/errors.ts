/** Typed errors for the module's error codes. */

export class HashlockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * This owner does not hold the lock any more (the server's NOTOWNER on
 * release; a renew or re-entry that found it gone; a KEEPALIVE connection
 * that closed): stop touching what it protected.
 */
export class LockLostError extends HashlockError {}
/** The server's name for LockLostError. */
export const NotOwnerError = LockLostError;
/** The key holds a hash that is not a lock (NOTLOCK). */
export class NotLockError extends HashlockError {}
/** The key holds a value that is not a hash (WRONGTYPE). */
export class WrongTypeError extends HashlockError {}
/** REPLICAS n ms: too few replicas acknowledged in time; the call was undone. */
export class NoReplicasError extends HashlockError {}
/** The server does not know LOCK.*: the hashlock module is not loaded there. */
export class ModuleNotLoadedError extends HashlockError {}
/** withLock / hold with timeoutMs (or a lease, a read or write hold, a campaign): the wait ended without it. */
export class LockTimeoutError extends HashlockError {}
/** ReadWriteLock: WRITE asked by an owner holding READ only (NOUPGRADE): an upgrade would deadlock; release READ first. Nothing changed. */
export class NoUpgradeError extends HashlockError {}
/** The key holds a string that is not a permit count (NOTSEMAPHORE). */
export class NotSemaphoreError extends HashlockError {}
/** The key holds a string that is not a latch count (NOTLATCH). */
export class NotLatchError extends HashlockError {}
/** Cluster: the keys (or a key and one derived from it) are in different slots (CROSSSLOT): give a MultiLock's names one hash tag. */
export class CrossSlotError extends HashlockError {}
/**
 * The server's notify-keyspace-events cannot deliver the module's lifecycle
 * events (it needs K and d): an Election observer would never hear of a
 * change. `CONFIG SET notify-keyspace-events Kd`.
 */
export class EventsDisabledError extends HashlockError {}

const BY_CODE: Record<string, new (m: string, o?: { cause?: unknown }) => HashlockError> = {
  NOTOWNER: LockLostError,
  NOTLOCK: NotLockError,
  WRONGTYPE: WrongTypeError,
  NOREPLICAS: NoReplicasError,
  NOUPGRADE: NoUpgradeError,
  NOTSEMAPHORE: NotSemaphoreError,
  NOTLATCH: NotLatchError,
  CROSSSLOT: CrossSlotError,
};

/** The typed error for a server error reply (node-redis ErrorReply, ioredis ReplyError), or the error itself. */
export function translate(err: unknown): unknown {
  if (!(err instanceof Error) || err instanceof HashlockError) return err;
  if (/^(ERR )?unknown command '(LOCK|SEMAPHORE|LATCH|RWLOCK)\./i.test(err.message)) {
    return new ModuleNotLoadedError(`the hashlock module is not loaded on this server (${err.message.trim()})`, { cause: err });
  }
  const cls = BY_CODE[err.message.split(' ', 1)[0]];
  return cls ? new cls(err.message, { cause: err }) : err;
}
