/**
 * Redisson's lock scripts, read from the one copy the Rust tests use
 * (crates/testkit/src/redisson.rs), so every test speaks the same protocol.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

import type { Adapter } from '../src';

const source = readFileSync(path.join(__dirname, '..', '..', '..', '..', 'crates', 'testkit', 'src', 'redisson.rs'), 'utf8');

function constant(name: string): string {
  const m = new RegExp(`pub const ${name}: &str = "([\\s\\S]*?)";`).exec(source);
  if (!m) throw new Error(`${name} not found in redisson.rs`);
  // A Rust "\<newline>" continuation drops the newline and the next line's indentation.
  return m[1].replace(/\\\n\s*/g, '');
}

const TRY_LOCK = constant('TRY_LOCK');
const UNLOCK = constant('UNLOCK');
const UNLOCK_MESSAGE = constant('UNLOCK_MESSAGE');

export function channel(key: string): string {
  return key.includes('{') ? `redisson_lock__channel:${key}` : `redisson_lock__channel:{${key}}`;
}

/** null = acquired (or re-entered), else the PTTL. */
export async function tryLock(c: Adapter, key: string, owner: string): Promise<number | null> {
  const r = await c.call(['EVAL', TRY_LOCK, '1', key, '30000', owner]);
  return r === null ? null : Number(r);
}

/** null = not held by owner, 0 = still held, 1 = freed. */
export async function unlock(c: Adapter, key: string, owner: string): Promise<number | null> {
  const r = await c.call(['EVAL', UNLOCK, '2', key, channel(key), UNLOCK_MESSAGE, '30000', owner]);
  return r === null ? null : Number(r);
}
