import { randomUUID } from 'node:crypto';

import { adapt, type Adapter, type Client } from './adapters';
import { HashlockError, LockLostError, LockTimeoutError, translate } from './errors';
import { Dedicated, poolFor, type ConnectionPool } from './pool';
import {
  acquireArgs,
  DEFAULT_LEASE_MS,
  DEFAULT_REPLICAS_TIMEOUT_MS,
  parseAcquire,
  parseInfo,
  renewArgs,
  toInt,
  untieArgs,
  type Arg,
  type LockInfo,
  type Settings,
} from './protocol';
import { Follower, QUIET } from './events';
import { Watch } from './watch';

export interface LockOptions {
  /** Lease set by every acquire and renew (default 30000, Redisson's). */
  leaseMs?: number;
  /** Tie the lock to a connection of the library's own (default true); false renews it from a watchdog timer. */
  keepalive?: boolean;
  /** Ask for a fencing token with every acquisition (lock.token). */
  token?: boolean;
  /** REPLICAS n ms: answer only once n replicas have the write. */
  replicas?: number | { n: number; timeoutMs: number };
  /** Owner id (default: a fresh UUID per Lock). */
  owner?: string;
}

export interface AcquireOptions {
  /** false: answer at once. Default true: wait in the server's queue. */
  blocking?: boolean;
  /** How long to wait (default: forever). */
  timeoutMs?: number;
  /** Aborting gives up the wait: its connection is closed, the server drops the waiter (and releases a grant on its way). */
  signal?: AbortSignal;
}

/** One hold, for `await using held = await lock.hold()`. */
export interface Held extends AsyncDisposable {
  readonly token?: bigint;
  /** Aborted when the lock is found lost. */
  readonly signal: AbortSignal;
  release(): Promise<number>;
}

function isReplyError(e: unknown): boolean {
  if (e instanceof HashlockError) return true;
  const name = (e as Error | undefined)?.constructor?.name;
  return name === 'ErrorReply' || name === 'SimpleError' || name === 'BlobError' || name === 'ReplyError';
}

/** Settles with `p`, or rejects with the signal's reason when it aborts (after calling onAbort). */
function abortable<T>(p: Promise<T>, signal: AbortSignal | undefined, onAbort: () => void): Promise<T> {
  if (!signal) return p;
  return new Promise<T>((resolve, reject) => {
    const abort = () => {
      onAbort();
      reject(signal.reason ?? new Error('aborted'));
    };
    if (signal.aborted) return abort();
    signal.addEventListener('abort', abort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', abort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', abort);
        reject(e);
      },
    );
  });
}

/** A failed call on the tied connection: the tie, and so the lock, is gone. */
function connectionLost(name: string, e: unknown): LockLostError & { lost: true } {
  const err = new LockLostError(`lock ${name}: its KEEPALIVE connection failed (${(e as Error)?.message ?? String(e)})`, { cause: e });
  return Object.assign(err, { lost: true as const });
}

/**
 * A reentrant lock on `name`, shared with every LOCK.* and Redisson client.
 * One Lock is one owner: give each concurrent task its own Lock.
 */
export class Lock implements AsyncDisposable {
  readonly name: string;
  readonly owner: string;
  readonly settings: Readonly<Settings>;
  /** The fencing token of the latest acquisition (token: true). */
  token?: bigint;

  private readonly adapter: Adapter;
  private readonly pool: ConnectionPool;
  private count = 0;
  private tied?: Dedicated;
  private watch?: Watch;
  private events?: Follower;
  private controller = new AbortController();

  constructor(client: Client, name: string, options: LockOptions = {}) {
    const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    if (!Number.isInteger(leaseMs) || leaseMs <= 0) throw new RangeError('leaseMs must be a positive integer');
    const r = options.replicas;
    this.adapter = adapt(client);
    this.pool = poolFor(client, this.adapter);
    this.name = name;
    this.owner = options.owner ?? randomUUID();
    this.settings = {
      leaseMs,
      keepalive: options.keepalive ?? true,
      token: options.token ?? false,
      replicas: r === undefined ? undefined : typeof r === 'number' ? { n: r, timeoutMs: DEFAULT_REPLICAS_TIMEOUT_MS } : r,
    };
  }

  /** Holds this Lock has taken and not released, as last seen. */
  get holds(): number {
    return this.count;
  }

  /**
   * Aborted (reason: LockLostError) when the current hold is found lost: at
   * once when its KEEPALIVE connection ends (closed, reset, an error, the
   * server shutting down), at the next check (every third of the lease) after
   * a FORCERELEASE or a lapsed lease, or when a release, renew or re-entry
   * finds it gone.
   */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Takes the lock or re-enters it; false if the wait ended without it. */
  async acquire(options: AcquireOptions = {}): Promise<boolean> {
    options.signal?.throwIfAborted();
    const { blocking = true, timeoutMs } = options;
    if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs < 0)) {
      throw new RangeError('timeoutMs must be >= 0');
    }
    // BLOCK 0 waits forever, so a zero timeout does not block at all.
    const blockMs = !blocking || timeoutMs === 0 ? undefined : timeoutMs === undefined ? 0 : Math.max(1, Math.ceil(timeoutMs));
    if (this.count > 0) return this.reenter();
    let got: ReturnType<typeof parseAcquire>;
    if (this.settings.keepalive || blockMs !== undefined) {
      got = await this.acquireDedicated(blockMs, options.signal);
    } else {
      got = parseAcquire(await this.call(acquireArgs(this.name, this.owner, this.settings, undefined)), this.settings.token);
    }
    if (!got) return false;
    this.count = got.count;
    if (this.settings.token) this.token = got.token;
    if (this.controller.signal.aborted) this.controller = new AbortController();
    this.startWatch();
    return true;
  }

  /**
   * An acquire on a connection of the library's own. It is always tied
   * (KEEPALIVE): if the wait is aborted, closing its connection takes it off
   * the server's queue and releases a grant already on its way.
   * keepalive: false unties it once the grant is read. A connection that
   * ends holding nothing goes back to the pool.
   */
  private async acquireDedicated(blockMs: number | undefined, signal?: AbortSignal) {
    const conn = new Dedicated(this.pool, this.name);
    const close = () => conn.close();
    let got: ReturnType<typeof parseAcquire>;
    try {
      const args = acquireArgs(this.name, this.owner, { ...this.settings, keepalive: true }, blockMs);
      got = parseAcquire(await abortable(conn.call(args), signal, close), this.settings.token);
      if (got && !this.settings.keepalive) {
        const untied = toInt(await abortable(conn.call(untieArgs(this.name, this.owner, this.settings)), signal, close));
        if (untied === 0) {
          conn.giveBack();
          throw new LockLostError(`lock ${this.name} was gone before the acquisition completed`);
        }
      }
    } catch (e) {
      if (e instanceof LockLostError) throw e;
      if (isReplyError(e)) conn.giveBack(); // an error reply changed nothing
      else conn.close();
      throw translate(e);
    }
    if (got && this.settings.keepalive) this.tied = conn;
    else conn.giveBack();
    return got;
  }

  private async reenter(): Promise<boolean> {
    const args = acquireArgs(this.name, this.owner, this.settings, undefined);
    const got = parseAcquire(await this.onTiedOrClient(args), this.settings.token);
    if (got && got.count === this.count + 1) {
      this.count = got.count;
      if (this.settings.token) this.token = got.token;
      return true;
    }
    if (got) await this.call(['LOCK.RELEASE', this.name, this.owner]).catch(() => {});
    const lost = new LockLostError(`lock ${this.name} was lost while held by ${this.owner} (re-entry found it gone)`);
    this.lose(lost, false);
    throw lost;
  }

  /** Drops one hold; returns the holds left (0 = released). LockLostError if not held. */
  async release(): Promise<number> {
    let left: number;
    try {
      left = toInt(await this.onTiedOrClient(['LOCK.RELEASE', this.name, this.owner]));
    } catch (e) {
      if (e instanceof LockLostError) this.lose(e, (e as { lost?: boolean }).lost === true);
      throw e;
    }
    this.count = left;
    if (left === 0) this.stop(false);
    return left;
  }

  /** Lease = leaseMs from now (keepalive: re-ties the lock to the lock's connection). */
  async renew(): Promise<void> {
    const args = renewArgs(this.name, this.owner, this.settings, this.settings.keepalive);
    let renewed: number;
    if (this.settings.keepalive && !this.tied) {
      const conn = new Dedicated(this.pool, this.name);
      try {
        renewed = toInt(await conn.call(args));
      } catch (e) {
        if (isReplyError(e)) conn.giveBack();
        else conn.close();
        throw translate(e);
      }
      if (renewed !== 0) {
        this.stop(false);
        this.tied = conn;
        this.count = Math.max(this.count, 1);
        if (this.controller.signal.aborted) this.controller = new AbortController();
        this.startWatch();
      } else {
        conn.giveBack();
      }
    } else {
      try {
        renewed = toInt(await this.onTiedOrClient(args));
      } catch (e) {
        if (e instanceof LockLostError) this.lose(e, (e as { lost?: boolean }).lost === true);
        throw e;
      }
    }
    if (renewed === 0) {
      const lost = new LockLostError(`lock ${this.name} is not held by ${this.owner} any more`);
      this.lose(lost, false);
      throw lost;
    }
  }

  /** LOCK.INFO; null when the lock is free. */
  async info(): Promise<LockInfo | null> {
    return parseInfo(await this.call(['LOCK.INFO', this.name]));
  }

  /** Held by anyone now. */
  async locked(): Promise<boolean> {
    return (await this.info()) !== null;
  }

  /** Held by this owner now. */
  async owned(): Promise<boolean> {
    return (await this.info())?.owner === this.owner;
  }

  /** acquire, then a Held whose disposal releases; LockTimeoutError if not acquired. */
  async hold(options: AcquireOptions = {}): Promise<Held> {
    if (!(await this.acquire(options))) {
      throw new LockTimeoutError(`lock ${this.name}: not acquired${options.timeoutMs === undefined ? ' (the server ended the wait, e.g. CLIENT UNBLOCK)' : ` within ${options.timeoutMs} ms`}`);
    }
    let released = false;
    const release = async () => {
      if (released) return this.count;
      released = true;
      return this.release();
    };
    return {
      token: this.token,
      signal: this.signal,
      release,
      [Symbol.asyncDispose]: async () => {
        await release();
      },
    };
  }

  /** Runs fn while holding the lock (fn gets the lost-lock signal); releases after. */
  async withLock<T>(fn: (signal: AbortSignal) => Promise<T> | T, options: AcquireOptions = {}): Promise<T> {
    const held = await this.hold(options);
    let result: T;
    try {
      result = await fn(held.signal);
    } catch (e) {
      await held.release().catch(() => {});
      throw e;
    }
    await held.release();
    return result;
  }

  /** Releases every hold this Lock has (errors ignored). */
  async [Symbol.asyncDispose](): Promise<void> {
    while (this.count > 0) {
      try {
        await this.release();
      } catch {
        break;
      }
    }
    this.stop(false);
  }

  // -- loss detection ---------------------------------------------------

  private startWatch(): void {
    if (this.watch?.watching) return;
    const watch = new Watch({
      intervalMs: Math.max(1, Math.floor(this.settings.leaseMs / 3)),
      check: () => this.check(),
      lost: (why, cause) => this.lose(new LockLostError(`lock ${this.name} held by ${this.owner} was lost: ${why}`, { cause }), true),
    });
    this.watch = watch;
    this.tied?.onEnd((why) => watch.connectionEnded(why));
    // Lifecycle events on the key: an ending event runs the check at once.
    this.events = new Follower(this.pool, this.name, (event) => {
      if (!QUIET.has(event)) watch.poke();
    });
  }

  /** The periodic check: keepalive re-ties and checks on the tied connection, the watchdog renews. */
  private async check(): Promise<boolean> {
    const tied = this.settings.keepalive ? this.tied : undefined;
    if (tied) {
      try {
        return toInt(await tied.call(renewArgs(this.name, this.owner, this.settings, true))) !== 0;
      } catch (e) {
        if (isReplyError(e)) throw e; // e.g. NOREPLICAS: try again at the next turn
        throw connectionLost(this.name, e);
      }
    }
    return toInt(await this.adapter.call(renewArgs(this.name, this.owner, this.settings, false))) !== 0;
  }

  /** The lock is gone: abort the signal and go back to not holding. */
  private lose(reason: LockLostError, close: boolean): void {
    if (!this.controller.signal.aborted) this.controller.abort(reason);
    this.stop(close);
  }

  /** Back to not holding: stop watching; the tied connection goes back to the pool, or is closed if it failed. */
  private stop(close: boolean): void {
    this.count = 0;
    this.watch?.stop();
    this.watch = undefined;
    this.events?.close();
    this.events = undefined;
    const tied = this.tied;
    this.tied = undefined;
    if (!tied) return;
    tied.onEnd(undefined);
    if (close) tied.close();
    else tied.giveBack();
  }

  // -- plumbing ---------------------------------------------------------

  private async call(args: Arg[]): Promise<unknown> {
    try {
      return await this.adapter.call(args);
    } catch (e) {
      throw translate(e);
    }
  }

  private async onTiedOrClient(args: Arg[]): Promise<unknown> {
    const tied = this.settings.keepalive ? this.tied : undefined;
    if (!tied) return this.call(args);
    try {
      return await tied.call(args);
    } catch (e) {
      if (isReplyError(e)) throw translate(e);
      // The tie is the connection: without it the server released the lock.
      throw connectionLost(this.name, e);
    }
  }
}
