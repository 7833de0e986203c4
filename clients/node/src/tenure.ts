/**
 * A hold on a connection of the library's own, for every primitive but the
 * original Lock: a semaphore lease, a read-write lock's holds, a multi-key
 * lock. The Lock's pieces (the pool's Dedicated connections, Watch, the
 * lifecycle events, typed errors) put together once:
 *
 * - the wait runs on a dedicated connection and is always tied (KEEPALIVE):
 *   if it is aborted, closing its connection takes it off the server's
 *   queue and gives back a grant already on its way; keepalive: false
 *   unties it once the grant is read (a watchdog then renews it);
 * - the hold is watched: its tied connection's end at once, lifecycle
 *   events on its key at once (a check runs), a check every third of the
 *   lease (renewal results: 0 = gone); `signal` aborts when it is lost;
 * - calls while held go over the tied connection; a clean end gives the
 *   connection back to the pool.
 */

import { adapt, type Adapter, type Client } from './adapters';
import { HashlockError, LockLostError, LockTimeoutError, translate } from './errors';
import { Follower, QUIET } from './events';
import { Dedicated, poolFor, type ConnectionPool } from './pool';
import { DEFAULT_LEASE_MS, DEFAULT_REPLICAS_TIMEOUT_MS, toInt, type Arg } from './protocol';
import { Watch } from './watch';

export interface TenureOptions {
  /** Lease of every hold (default 30000). */
  leaseMs?: number;
  /** Tie the holds to a connection of the library's own (default true); false renews them from a watchdog. */
  keepalive?: boolean;
  /** REPLICAS n ms. */
  replicas?: number | { n: number; timeoutMs: number };
}

export interface WaitOptions {
  /** false: answer at once. Default true: wait in the server's queue. */
  blocking?: boolean;
  /** How long to wait (default: forever). */
  timeoutMs?: number;
  /** Aborting gives up the wait; it is never granted. */
  signal?: AbortSignal;
}

export function isReplyError(e: unknown): boolean {
  if (e instanceof HashlockError) return true;
  const name = (e as Error | undefined)?.constructor?.name;
  return name === 'ErrorReply' || name === 'SimpleError' || name === 'BlobError' || name === 'ReplyError';
}

/** The BLOCK milliseconds of a wait (undefined: do not block; 0: forever). */
export function blockMs(options: WaitOptions): number | undefined {
  const { blocking = true, timeoutMs } = options;
  if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs < 0)) throw new RangeError('timeoutMs must be >= 0');
  return !blocking || timeoutMs === 0 ? undefined : timeoutMs === undefined ? 0 : Math.max(1, Math.ceil(timeoutMs));
}

export function timeoutError(what: string, options: WaitOptions): LockTimeoutError {
  return new LockTimeoutError(`${what}: not acquired${options.timeoutMs === undefined ? ' (the server ended the wait, e.g. CLIENT UNBLOCK)' : ` within ${options.timeoutMs} ms`}`);
}

/** Settles with `p`, or rejects with the signal's reason when it aborts (after calling onAbort). */
export function abortable<T>(p: Promise<T>, signal: AbortSignal | undefined, onAbort: () => void): Promise<T> {
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

export function withOptions(args: Arg[], o: { leaseMs?: number; blockMs?: number; keepalive?: boolean; replicas?: { n: number; timeoutMs: number } }): Arg[] {
  if (o.leaseMs !== undefined) args.push('PX', String(o.leaseMs));
  if (o.blockMs !== undefined) args.push('BLOCK', String(o.blockMs));
  if (o.keepalive) args.push('KEEPALIVE');
  if (o.replicas) args.push('REPLICAS', String(o.replicas.n), String(o.replicas.timeoutMs));
  return args;
}

export abstract class Tenure {
  readonly leaseMs: number;
  readonly keepalive: boolean;
  readonly replicas?: { n: number; timeoutMs: number };
  protected readonly adapter: Adapter;
  protected readonly pool: ConnectionPool;
  protected tied?: Dedicated;
  private watch?: Watch;
  private events?: Follower;
  private controller = new AbortController();

  constructor(
    client: Client,
    protected readonly key: string,
    options: TenureOptions,
  ) {
    const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    if (!Number.isInteger(leaseMs) || leaseMs <= 0) throw new RangeError('leaseMs must be a positive integer');
    this.leaseMs = leaseMs;
    this.keepalive = options.keepalive ?? true;
    const r = options.replicas;
    this.replicas = r === undefined ? undefined : typeof r === 'number' ? { n: r, timeoutMs: DEFAULT_REPLICAS_TIMEOUT_MS } : r;
    this.adapter = adapt(client);
    this.pool = poolFor(client, this.adapter);
  }

  /** Commands that renew (with KEEPALIVE: re-tie) every hold, each answering 1 while held, 0 once gone. */
  protected abstract renewArgs(keepalive: boolean): Arg[][];
  /** Back to holding nothing (the counts). */
  protected abstract forget(): void;
  protected abstract describe(): string;

  /** Aborted (reason: LockLostError) when the hold is found lost. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** True once the hold was found lost (until the next acquisition). */
  get lost(): boolean {
    return this.controller.signal.aborted;
  }

  protected lostError(why: string, cause?: unknown): LockLostError {
    return new LockLostError(`${this.describe()} was lost: ${why}`, cause === undefined ? undefined : { cause });
  }

  /** A tied acquisition (`args` carry KEEPALIVE) on a connection of the library's own; `parse` gives null when nothing was granted. */
  protected async wait<T>(args: Arg[], signal: AbortSignal | undefined, parse: (reply: unknown) => T | null): Promise<T | null> {
    signal?.throwIfAborted();
    const conn = new Dedicated(this.pool, this.key);
    const close = () => conn.close();
    let got: T | null;
    try {
      got = parse(await abortable(conn.call(args), signal, close));
      if (got !== null && !this.keepalive) {
        for (const cmd of this.renewArgs(false)) {
          if (toInt(await abortable(conn.call(cmd), signal, close)) === 0) {
            conn.giveBack();
            throw this.lostError('gone before the acquisition completed');
          }
        }
      }
    } catch (e) {
      if (e instanceof LockLostError) throw e;
      if (isReplyError(e)) conn.giveBack();
      else conn.close();
      throw translate(e);
    }
    if (got !== null && this.keepalive) this.tied = conn;
    else conn.giveBack();
    if (got !== null) {
      if (this.controller.signal.aborted) this.controller = new AbortController();
      this.startWatch();
    }
    return got;
  }

  /** A call on the tied connection, or on the user's client. A failed tied connection is a lost hold. */
  protected async callHeld(args: Arg[]): Promise<unknown> {
    const tied = this.tied;
    if (!tied) return this.call(args);
    try {
      return await tied.call(args);
    } catch (e) {
      if (isReplyError(e)) throw translate(e);
      const lost = this.lostError(`its KEEPALIVE connection failed (${(e as Error)?.message})`, e);
      this.lose(lost, true);
      throw lost;
    }
  }

  protected async call(args: Arg[]): Promise<unknown> {
    try {
      return await this.adapter.call(args);
    } catch (e) {
      throw translate(e);
    }
  }

  private startWatch(): void {
    const watch = new Watch({
      intervalMs: Math.max(1, Math.floor(this.leaseMs / 3)),
      check: () => this.check(),
      lost: (why, cause) => this.lose(this.lostError(why, cause), true),
      gone: 'a check (renewal) found it gone',
    });
    this.watch = watch;
    this.tied?.onEnd((why) => watch.connectionEnded(why));
    this.events = new Follower(this.pool, this.key, (event) => {
      if (!QUIET.has(event)) watch.poke();
    });
  }

  private async check(): Promise<boolean> {
    const tied = this.keepalive ? this.tied : undefined;
    for (const cmd of this.renewArgs(tied !== undefined)) {
      let n: number;
      if (tied) {
        try {
          n = toInt(await tied.call(cmd));
        } catch (e) {
          if (isReplyError(e)) throw e;
          throw Object.assign(this.lostError(`its KEEPALIVE connection failed (${(e as Error)?.message})`, e), { lost: true });
        }
      } else {
        n = toInt(await this.adapter.call(cmd));
      }
      if (n === 0) return false;
    }
    return true;
  }

  /** The hold is gone: abort the signal, back to holding nothing. */
  protected lose(reason: LockLostError, close: boolean): void {
    if (!this.controller.signal.aborted) this.controller.abort(reason);
    this.stop(close);
  }

  /** Back to holding nothing: the tied connection goes back to the pool, or is closed (`close`: it failed, or closing releases). */
  protected stop(close: boolean): void {
    this.forget();
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
}
