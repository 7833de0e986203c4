//! Redisson's names derived from a lock's key: the unlock channel (so
//! Redisson clients waiting on a lock taken through LOCK.* are woken as
//! usual) and RFencedLock's token counter (so both issue one sequence).

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
