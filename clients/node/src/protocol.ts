/** LOCK.* arguments and reply parsing (no I/O). */

export const DEFAULT_LEASE_MS = 30_000;
export const DEFAULT_REPLICAS_TIMEOUT_MS = 1_000;

export type Arg = string | number | Buffer;

export interface Settings {
  leaseMs: number;
  keepalive: boolean;
  token: boolean;
  replicas?: { n: number; timeoutMs: number };
}

export function acquireArgs(name: string, owner: string, s: Settings, blockMs?: number): Arg[] {
  const args: Arg[] = ['LOCK.ACQUIRE', name, owner, 'PX', String(s.leaseMs)];
  if (blockMs !== undefined) args.push('BLOCK', String(blockMs));
  if (s.keepalive) args.push('KEEPALIVE');
  if (s.token) args.push('TOKEN');
  if (s.replicas) args.push('REPLICAS', String(s.replicas.n), String(s.replicas.timeoutMs));
  return args;
}

export function renewArgs(name: string, owner: string, s: Settings, keepalive: boolean): Arg[] {
  const args: Arg[] = ['LOCK.RENEW', name, owner, 'PX', String(s.leaseMs)];
  if (keepalive) args.push('KEEPALIVE');
  if (s.replicas) args.push('REPLICAS', String(s.replicas.n), String(s.replicas.timeoutMs));
  return args;
}

/**
 * keepalive: false after a wait: the wait was tied to its connection
 * (KEEPALIVE), so that a grant on its way to an aborted wait is released by
 * the server when the connection closes; once the grant is read, this makes
 * it a plain lease again. REPLICAS 0: the grant itself was acknowledged as
 * asked; a lost untie only leaves the grant's lease.
 */
export function untieArgs(name: string, owner: string, s: Settings): Arg[] {
  return ['LOCK.RENEW', name, owner, 'PX', String(s.leaseMs), 'REPLICAS', '0', String(DEFAULT_REPLICAS_TIMEOUT_MS)];
}

export function toInt(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'string' || Buffer.isBuffer(v)) return Number(String(v));
  throw new TypeError(`expected an integer reply, got ${String(v)}`);
}

function toBigInt(v: unknown): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') return BigInt(v);
  return BigInt(String(v));
}

/** LOCK.ACQUIRE's reply: null when busy, else the hold count and (TOKEN) the token. */
export function parseAcquire(reply: unknown, token: boolean): { count: number; token?: bigint } | null {
  if (reply === null || reply === undefined) return null;
  if (token) {
    if (!Array.isArray(reply) || reply.length !== 2) {
      throw new TypeError(`LOCK.ACQUIRE ... TOKEN: expected [count, token], got ${String(reply)}`);
    }
    return { count: toInt(reply[0]), token: toBigInt(reply[1]) };
  }
  return { count: toInt(reply) };
}

export interface LockInfo {
  owner: string;
  holds: number;
  /** Milliseconds left; -1 = no expiry. */
  ttlMs: number;
  waiters: number;
  /** Tied to a connection (undefined: the module does not report it). */
  keepalive?: boolean;
  /** The last fencing token issued for this key (undefined: not reported). */
  token?: bigint;
}

/** LOCK.INFO: RESP2 flat array, RESP3 map (Map or plain object, by client). */
export function parseInfo(reply: unknown): LockInfo | null {
  if (reply === null || reply === undefined) return null;
  const fields = new Map<string, unknown>();
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) fields.set(String(reply[i]), reply[i + 1]);
  } else if (reply instanceof Map) {
    for (const [k, v] of reply) fields.set(String(k), v);
  } else if (typeof reply === 'object') {
    for (const [k, v] of Object.entries(reply as object)) fields.set(k, v);
  } else {
    throw new TypeError(`LOCK.INFO: unexpected reply ${String(reply)}`);
  }
  const keepalive = fields.get('keepalive');
  const token = fields.get('token');
  return {
    owner: String(fields.get('owner')),
    holds: toInt(fields.get('holds')),
    ttlMs: toInt(fields.get('ttl')),
    waiters: toInt(fields.get('waiters')),
    keepalive: keepalive === undefined ? undefined : toInt(keepalive) !== 0,
    token: token === undefined ? undefined : toBigInt(token),
  };
}
