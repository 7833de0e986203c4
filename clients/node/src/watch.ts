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
 * Lifecycle keyspace events (`lock.*`, class `d`) will be a third source:
 * an event for the key then triggers a check at once.
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
}

export class Watch {
  private timer?: NodeJS.Timeout;
  private active = true;

  constructor(private readonly opts: WatchOptions) {
    this.schedule();
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

  private async turn(): Promise<void> {
    if (!this.active) return;
    let held = true;
    try {
      held = await this.opts.check();
    } catch (e) {
      if ((e as { lost?: boolean }).lost) return this.report((e as Error).message, e);
      // transient: the lease is the safety net until the next turn
    }
    if (!this.active) return;
    if (!held) return this.report('a check (LOCK.RENEW) found it gone');
    this.schedule();
  }
}
