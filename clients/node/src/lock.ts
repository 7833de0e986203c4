import { randomUUID } from 'node:crypto';

import { adapt, type Adapter, type Client, type Connection } from './adapters';
import { HashlockError, LockLostError, LockTimeoutError, translate } from './errors';
import {
  acquireArgs,
  DEFAULT_LEASE_MS,
  DEFAULT_REPLICAS_TIMEOUT_MS,
  parseAcquire,
  parseInfo,
  renewArgs,
  type Arg,
  type LockInfo,
  type Settings,
} from './protocol';

export interface LockOptions {
  /** Lease set by every acquire and renew (default 30000, Redisson's). */
  leaseMs?: number;
  /** Tie the lock to a connection of the lock's own (default true); false runs a watchdog timer. */
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
  /** Aborting gives up the wait: its connection is closed, the server drops the waiter. */
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

function toInt(v: unknown): number {
  return typeof v === 'number' ? v : Number(String(v));
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
  private count = 0;
  private tied?: Connection;
  private watchdog?: NodeJS.Timeout;
  private controller = new AbortController();
  private cleanup?: Promise<void>;

  constructor(client: Client, name: string, options: LockOptions = {}) {
    const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    if (!Number.isInteger(leaseMs) || leaseMs <= 0) throw new RangeError('leaseMs must be a positive integer');
    const r = options.replicas;
    this.adapter = adapt(client);
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

  /** Aborted (reason: LockLostError) when the current hold is found lost. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Takes the lock or re-enters it; false if the wait ended without it. */
  async acquire(options: AcquireOptions = {}): Promise<boolean> {
    await this.settle();
    options.signal?.throwIfAborted();
    const { blocking = true, timeoutMs } = options;
    if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs < 0)) {
      throw new RangeError('timeoutMs must be >= 0');
    }
    // BLOCK 0 waits forever, so a zero timeout does not block at all.
    const blockMs = !blocking || timeoutMs === 0 ? undefined : timeoutMs === undefined ? 0 : Math.max(1, Math.ceil(timeoutMs));
    if (this.count > 0) return this.reenter();
    const args = acquireArgs(this.name, this.owner, this.settings, blockMs);
    let got: ReturnType<typeof parseAcquire>;
    if (this.settings.keepalive || blockMs !== undefined) {
      got = await this.acquireOnOwnConnection(args, blockMs !== undefined, options.signal);
    } else {
      got = parseAcquire(await this.call(args), this.settings.token);
    }
    if (!got) return false;
    this.count = got.count;
    if (this.settings.token) this.token = got.token;
    if (this.controller.signal.aborted) this.controller = new AbortController();
    if (!this.settings.keepalive) this.startWatchdog();
    return true;
  }

  private async acquireOnOwnConnection(args: Arg[], waits: boolean, signal?: AbortSignal) {
    const conn = await this.adapter.connect();
    let got: ReturnType<typeof parseAcquire>;
    try {
      got = parseAcquire(await abortable(conn.call(args), signal, () => conn.close()), this.settings.token);
    } catch (e) {
      conn.close();
      if (waits && !this.settings.keepalive && !isReplyError(e)) {
        // Abandoned after sending: a grant may sit unread in the closed
        // socket. Give it back before this Lock's next call.
        this.cleanup = this.adapter.call(['LOCK.RELEASE', this.name, this.owner]).then(
          () => {},
          () => {},
        );
      }
      throw translate(e);
    }
    if (got && this.settings.keepalive) {
      this.tied = conn;
      conn.onLost(() => this.lose(new LockLostError(`lock ${this.name}: its KEEPALIVE connection closed`)));
    } else {
      conn.close();
    }
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
    this.lose(lost);
    throw lost;
  }

  /** Drops one hold; returns the holds left (0 = released). LockLostError if not held. */
  async release(): Promise<number> {
    await this.settle();
    let left: number;
    try {
      left = toInt(await this.onTiedOrClient(['LOCK.RELEASE', this.name, this.owner]));
    } catch (e) {
      if (e instanceof LockLostError) this.lose(e);
      throw e;
    }
    this.count = left;
    if (left === 0) this.forget();
    return left;
  }

  /** Lease = leaseMs from now (keepalive: re-ties the lock to the lock's connection). */
  async renew(): Promise<void> {
    await this.settle();
    const args = renewArgs(this.name, this.owner, this.settings, this.settings.keepalive);
    if (this.settings.keepalive && !this.tied) {
      const conn = await this.adapter.connect();
      this.tied = conn;
      conn.onLost(() => this.lose(new LockLostError(`lock ${this.name}: its KEEPALIVE connection closed`)));
    }
    let renewed: number;
    try {
      renewed = toInt(await this.onTiedOrClient(args));
    } catch (e) {
      if (e instanceof LockLostError) this.lose(e);
      throw e;
    }
    if (renewed === 0) {
      const lost = new LockLostError(`lock ${this.name} is not held by ${this.owner} any more`);
      this.lose(lost);
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
      throw new LockTimeoutError(`lock ${this.name}: not acquired${options.timeoutMs === undefined ? " (the server ended the wait, e.g. CLIENT UNBLOCK)" : ` within ${options.timeoutMs} ms`}`);
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

  /** Releases every hold this Lock has (errors ignored) and closes its connections. */
  async [Symbol.asyncDispose](): Promise<void> {
    while (this.count > 0) {
      try {
        await this.release();
      } catch {
        break;
      }
    }
    this.forget();
  }

  private async settle(): Promise<void> {
    const pending = this.cleanup;
    this.cleanup = undefined;
    if (pending) await pending;
  }

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
      throw new LockLostError(`lock ${this.name}: its KEEPALIVE connection failed (${(e as Error).message})`, { cause: e });
    }
  }

  private startWatchdog(): void {
    if (this.watchdog) return;
    const args = renewArgs(this.name, this.owner, this.settings, false);
    this.watchdog = setInterval(() => {
      this.adapter.call(args).then(
        (renewed) => {
          if (toInt(renewed) === 0 && this.watchdog) {
            this.lose(new LockLostError(`lock ${this.name}: the watchdog found it gone`));
          }
        },
        () => {}, // transient; the lease is the safety net until the next try
      );
    }, this.settings.leaseMs / 3);
    this.watchdog.unref();
  }

  /** The lock is gone: signal it and go back to not holding. */
  private lose(reason: LockLostError): void {
    if (!this.controller.signal.aborted) this.controller.abort(reason);
    this.forget();
  }

  private forget(): void {
    this.count = 0;
    if (this.watchdog) {
      clearInterval(this.watchdog);
      this.watchdog = undefined;
    }
    const tied = this.tied;
    this.tied = undefined;
    tied?.close();
  }
}
