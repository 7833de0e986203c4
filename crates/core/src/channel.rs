//! Redisson's names derived from an object's key: the lock's unlock channel
//! (so Redisson clients waiting on a lock taken through LOCK.* are woken as
//! usual), RFencedLock's token counter (so both issue one sequence), the
//! semaphore's channel and lease set, and the latch's channel.
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
