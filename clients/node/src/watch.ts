/**
 * Loss detection: a held thing is watched until it is given back, and its
 * loss reported as soon as it can be told.
 *
 * - Its own connection (when the server ties it to it, KEEPALIVE): the
 *   connection ending (closed by the server, reset, an error, a shutdown)
 *   means it is gone: reported at once.
 * - A periodic check, every third of the lease: a call whose answer says
 *   whether it is still held (the watchdog's LOCK.RENEW; LOCK.RENEW ...
 *   KEEPALIVE on the tied connection, which also re-ties a lock whose tie
 *   did not follow it). A FORCERELEASE, a lapsed lease or a failover that
 *   lost it shows there.
 *
 * - Lifecycle keyspace events (`lock.*`, class `d`, see events.ts) where
 *   the server sends them: an event on the held key pokes the watch, which
 *   checks at once, so a FORCERELEASE or an expiry is reported as it happens.
 *
 * Nothing here knows about locks.
 */

export interface WatchOptions {
  /** Milliseconds between checks. */
  intervalMs: number;
  /** Resolves true while held, false once gone; a rejection is retried at the next turn unless `fatal` says otherwise. */
  check: () => Promise<boolean>;
  /** Called once with the reason when the thing is found gone. */
  lost: (why: string, cause?: unknown) => void;
  /** The reason given when a check finds it gone. */
  gone?: string;
}

export class Watch {
  private timer?: NodeJS.Timeout;
  private active = true;

  constructor(private readonly opts: WatchOptions) {
    this.schedule();
  }

  /** Check now (a lifecycle event on what it watches); during a turn, once more after it. */
  poke(): void {
    if (!this.active) return;
    if (this.turning) {
      // The turn under way may have been answered before what this event reports: another turn after it.
      this.again = true;
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    void this.turn();
  }

  /** The watched connection ended. */
  connectionEnded(why: Error): void {
    this.report(`its connection ended (${why.message})`, why);
  }

  /** Stops watching (the thing was given back, or found lost). */
  stop(): void {
    this.active = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  get watching(): boolean {
    return this.active;
  }

  private report(why: string, cause?: unknown): void {
    if (!this.active) return;
    this.stop();
    this.opts.lost(why, cause);
  }

  private schedule(): void {
    if (!this.active) return;
    this.timer = setTimeout(() => void this.turn(), this.opts.intervalMs);
    this.timer.unref();
  }

  private turning = false;
  private again = false;

  private async turn(): Promise<void> {
    if (!this.active) return;
    let held = true;
    this.turning = true;
    this.again = false;
    try {
      held = await this.opts.check();
    } catch (e) {
      if ((e as { lost?: boolean }).lost) return this.report((e as Error).message, e);
      // transient: the lease is the safety net until the next turn
    } finally {
      this.turning = false;
    }
    if (!this.active) return;
    if (!held) return this.report(this.opts.gone ?? 'a check (LOCK.RENEW) found it gone');
    if (this.again) return void this.turn();
    this.schedule();
  }
}
