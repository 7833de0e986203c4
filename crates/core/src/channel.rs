//! Redisson's names derived from an object's key: the lock's unlock channel
//! (so Redisson clients waiting on a lock taken through LOCK.* are woken as
//! usual), RFencedLock's token counter (so both issue one sequence), the
//! semaphore's channel and lease set, the latch's channel, and the
//! read-write lock's channel and its read holds' timeout keys.
//!
//! Redisson's naming rule (`RedissonObject.prefixName`/`suffixName`): with
//! no `{` in the key, `prefix:{key}` and `{key}:suffix`; with one,
//! `prefix:key` and `key:suffix`. The latch channel is the exception: its
//! braces are always added.

/// Redisson's UNLOCK_MESSAGE.
pub const UNLOCK_MESSAGE: &[u8] = b"0";
const CHANNEL_PREFIX: &[u8] = b"redisson_lock__channel:";
const TOKEN_PREFIX: &[u8] = b"redisson_lock_token:";

/// `redisson_lock__channel:{<key>}`, or without the added braces when the key
/// already contains `{` (Redisson's `prefixName` rule).
pub fn unlock_channel(key: &[u8]) -> Vec<u8> {
    prefixed(CHANNEL_PREFIX, key)
}

/// RFencedLock's counter: `redisson_lock_token:{<key>}`, same braces rule.
pub fn token_key(key: &[u8]) -> Vec<u8> {
    prefixed(TOKEN_PREFIX, key)
}

const SEMAPHORE_PREFIX: &[u8] = b"redisson_sc:";
const TIMEOUT_SUFFIX: &[u8] = b":timeout";
const LATCH_PREFIX: &[u8] = b"redisson_countdownlatch__channel__";

/// RSemaphore's and RPermitExpirableSemaphore's channel:
/// `redisson_sc:{<key>}` (`prefixName` rule).
pub fn semaphore_channel(key: &[u8]) -> Vec<u8> {
    prefixed(SEMAPHORE_PREFIX, key)
}

/// RPermitExpirableSemaphore's lease set: `{<key>}:timeout`, or
/// `<key>:timeout` when the key already contains `{` (`suffixName` rule).
pub fn timeout_key(key: &[u8]) -> Vec<u8> {
    let braces = !key.contains(&b'{');
    let mut name = Vec::with_capacity(key.len() + TIMEOUT_SUFFIX.len() + 2);
    if braces {
        name.push(b'{');
    }
    name.extend_from_slice(key);
    if braces {
        name.push(b'}');
    }
    name.extend_from_slice(TIMEOUT_SUFFIX);
    name
}

/// RCountDownLatch's channel: `redisson_countdownlatch__channel__{<key>}`,
/// braces always added (not `prefixName`: a key with a hash tag gets a
/// channel in another slot).
pub fn latch_channel(key: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(LATCH_PREFIX.len() + key.len() + 2);
    name.extend_from_slice(LATCH_PREFIX);
    name.push(b'{');
    name.extend_from_slice(key);
    name.push(b'}');
    name
}

/// RReadWriteLock's channel: `redisson_rwlock:{<key>}` (`prefixName`).
pub fn rwlock_channel(key: &[u8]) -> Vec<u8> {
    prefixed(RWLOCK_CHANNEL_PREFIX, key)
}

/// The timeout key of an RW lock's read hold `n` (1-based) of `owner`:
/// `{<key>}:<owner>:rwlock_timeout:<n>`, or `<key>:<owner>:rwlock_timeout:<n>`
/// when the key contains `{` (`suffixName(key, owner) + ":rwlock_timeout:" + n`).
pub fn rwlock_timeout_key(key: &[u8], owner: &[u8], n: i64) -> Vec<u8> {
    let mut name = Vec::with_capacity(key.len() + owner.len() + 40);
    suffixed_into(&mut name, key);
    name.extend_from_slice(owner);
    name.extend_from_slice(RWLOCK_TIMEOUT_INFIX);
    name.extend_from_slice(n.to_string().as_bytes());
    name
}

/// Redisson's READ_UNLOCK_MESSAGE on the RW channel: a write release ended
/// write mode, or a force release (wakes every waiting Redisson client).
pub const RW_WRITE_UNLOCK_MESSAGE: &[u8] = b"1";
/// Redisson's UNLOCK_MESSAGE on the RW channel: a read release freed the lock.
pub const RW_READ_UNLOCK_MESSAGE: &[u8] = b"0";
const RWLOCK_CHANNEL_PREFIX: &[u8] = b"redisson_rwlock:";
const RWLOCK_TIMEOUT_INFIX: &[u8] = b":rwlock_timeout:";

/// `suffixName(key, "")`: `{key}:` or `key:`, appended to `name`.
fn suffixed_into(name: &mut Vec<u8>, key: &[u8]) {
    if key.contains(&b'{') {
        name.extend_from_slice(key);
    } else {
        name.push(b'{');
        name.extend_from_slice(key);
        name.push(b'}');
    }
    name.push(b':');
}

fn prefixed(prefix: &[u8], key: &[u8]) -> Vec<u8> {
    let braces = !key.contains(&b'{');
    let mut name = Vec::with_capacity(prefix.len() + key.len() + 2);
    name.extend_from_slice(prefix);
    if braces {
        name.push(b'{');
    }
    name.extend_from_slice(key);
    if braces {
        name.push(b'}');
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redisson_rule() {
        assert_eq!(
            unlock_channel(b"orders"),
            b"redisson_lock__channel:{orders}"
        );
        assert_eq!(
            unlock_channel(b"{user1}:lock"),
            b"redisson_lock__channel:{user1}:lock"
        );
        assert_eq!(unlock_channel(b"a{b"), b"redisson_lock__channel:a{b");
        assert_eq!(unlock_channel(b"x}y"), b"redisson_lock__channel:{x}y}");
        assert_eq!(unlock_channel(b"\0"), b"redisson_lock__channel:{\0}");
    }

    #[test]
    fn semaphore_and_latch_names() {
        assert_eq!(semaphore_channel(b"stock"), b"redisson_sc:{stock}");
        assert_eq!(semaphore_channel(b"{s}:1"), b"redisson_sc:{s}:1");
        assert_eq!(timeout_key(b"stock"), b"{stock}:timeout");
        assert_eq!(timeout_key(b"{s}:1"), b"{s}:1:timeout");
        assert_eq!(timeout_key(b"a{b"), b"a{b:timeout");
        assert_eq!(timeout_key(b""), b"{}:timeout");
        assert_eq!(
            latch_channel(b"done"),
            b"redisson_countdownlatch__channel__{done}"
        );
        assert_eq!(
            latch_channel(b"{x}"),
            b"redisson_countdownlatch__channel__{{x}}"
        );
    }

    #[test]
    fn rwlock_names() {
        assert_eq!(rwlock_channel(b"rw"), b"redisson_rwlock:{rw}");
        assert_eq!(rwlock_channel(b"u:{42}:rw"), b"redisson_rwlock:u:{42}:rw");
        assert_eq!(
            rwlock_timeout_key(b"rw", b"6e38-aa:1", 2),
            b"{rw}:6e38-aa:1:rwlock_timeout:2"
        );
        assert_eq!(
            rwlock_timeout_key(b"user:{42}:lock", b"u:1", 1),
            b"user:{42}:lock:u:1:rwlock_timeout:1"
        );
        assert_eq!(
            rwlock_timeout_key(b"a{b", b"o", 10),
            b"a{b:o:rwlock_timeout:10"
        );
        assert_eq!(
            rwlock_timeout_key(b"x}y", b"o", 1),
            b"{x}y}:o:rwlock_timeout:1"
        );
    }

    #[test]
    fn token_key_shares_the_slot_when_redisson_can() {
        use crate::slot::key_slot;
        assert_eq!(token_key(b"orders"), b"redisson_lock_token:{orders}");
        assert_eq!(token_key(b"{u1}:lock"), b"redisson_lock_token:{u1}:lock");
        for key in [&b"orders"[..], b"{u1}:lock", b"\0"] {
            assert_eq!(key_slot(&token_key(key)), key_slot(key), "{key:?}");
        }
        // A `{` without a valid tag, a `}` before any `{`, the empty key:
        // Redisson's names land in another slot.
        for key in [&b"a{b"[..], b"x}y", b""] {
            assert_ne!(key_slot(&token_key(key)), key_slot(key), "{key:?}");
        }
    }
}
