//! Redisson's unlock channel naming, so Redisson clients waiting on a lock
//! taken through LOCK.* are woken as usual.

/// Redisson's UNLOCK_MESSAGE.
pub const UNLOCK_MESSAGE: &[u8] = b"0";
const PREFIX: &[u8] = b"redisson_lock__channel:";

/// `redisson_lock__channel:{<key>}`, or without the added braces when the key
/// already contains `{` (Redisson's `prefixName` rule).
pub fn unlock_channel(key: &[u8]) -> Vec<u8> {
    let braces = !key.contains(&b'{');
    let mut name = Vec::with_capacity(PREFIX.len() + key.len() + 2);
    name.extend_from_slice(PREFIX);
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
}
