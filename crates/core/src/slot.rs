//! Redis Cluster key slots (CRC16/XMODEM of the key or of its hash tag), so
//! the module can tell whether two keys it writes share a slot.

/// The cluster slot of `key`, as `CLUSTER KEYSLOT` computes it.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & 0x3FFF
}

/// Whether two names land in the same cluster slot.
pub fn same_slot(a: &[u8], b: &[u8]) -> bool {
    key_slot(a) == key_slot(b)
}

/// Whether a semaphore's lease set `{key}:timeout` shares the key's slot
/// (else a call that would write it answers CROSSSLOT in cluster mode).
pub fn timeout_key_same_slot(key: &[u8]) -> bool {
    same_slot(&crate::channel::timeout_key(key), key)
}

/// Whether a semaphore's channel `redisson_sc:{key}` shares the key's slot
/// (else, in cluster mode, its publish is skipped).
pub fn semaphore_channel_same_slot(key: &[u8]) -> bool {
    same_slot(&crate::channel::semaphore_channel(key), key)
}

/// Whether a latch's channel (always braced) shares the key's slot: not for
/// a key with a valid hash tag (`{x}` → `...{{x}}`); its publish is then
/// skipped in cluster mode.
pub fn latch_channel_same_slot(key: &[u8]) -> bool {
    same_slot(&crate::channel::latch_channel(key), key)
}

/// Whether every read-hold timeout key of the RW lock at `key`
/// (`{key}:<owner>:rwlock_timeout:<n>`), whatever the owner, hashes to the
/// key's slot: the key has a valid hash tag, or has neither `{` nor `}` (and
/// is not empty). Otherwise some owner's timeout keys land elsewhere, and in
/// cluster mode a call writing them answers CROSSSLOT.
pub fn rwlock_timeout_keys_same_slot(key: &[u8]) -> bool {
    if key.contains(&b'{') {
        // `key:<owner>:...`: the key's own tag, if it has one, comes first.
        return has_hash_tag(key);
    }
    // `{key}:...`: the tag is `key`, up to its first `}`.
    !key.is_empty() && !key.contains(&b'}')
}

/// Whether `owner`'s read-hold timeout keys of the RW lock at `key` hash to
/// the key's slot (exact, for one owner: with a `{` but no valid tag in the
/// key, a `}` in the owner can close a tag).
pub fn rwlock_timeout_key_same_slot(key: &[u8], owner: &[u8]) -> bool {
    rwlock_timeout_keys_same_slot(key)
        || key_slot(&crate::channel::rwlock_timeout_key(key, owner, 1)) == key_slot(key)
}

/// Whether all `keys` hash to one slot (LOCK.MACQUIRE / LOCK.MRELEASE in
/// cluster mode).
pub fn all_same_slot<K: AsRef<[u8]>>(keys: &[K]) -> bool {
    let mut slots = keys.iter().map(|k| key_slot(k.as_ref()));
    let first = slots.next();
    slots.all(|s| Some(s) == first)
}

/// Whether the key has a non-empty `{...}` (its slot is the tag's).
fn has_hash_tag(key: &[u8]) -> bool {
    hash_tag(key).len() != key.len()
}

/// The part of the key that is hashed: the first `{...}` with something
/// inside, else the whole key.
fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis() {
        // Values from CLUSTER KEYSLOT on Redis 7.0.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"foo{}{bar}"), 8363);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{bar"), 4015);
        assert_eq!(key_slot(b"a{b"), 13340);
        assert_eq!(key_slot(b"user1000"), 3443);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
    }

    #[test]
    fn derived_names_of_the_family() {
        // REDISSON-FAMILY.md §0.3: no braces, or a valid tag, share the slot.
        for key in [&b"x"[..], b"user:{42}:sem", b"{s}"] {
            assert!(timeout_key_same_slot(key), "{key:?}");
            assert!(semaphore_channel_same_slot(key), "{key:?}");
        }
        // A `}` without a `{`, a `{` without a valid tag, an empty tag.
        for key in [&b"a}b"[..], b"a{b", b"{}x"] {
            assert!(!timeout_key_same_slot(key), "{key:?}");
        }
        assert_eq!(key_slot(b"a}b"), 7866);
        assert_eq!(key_slot(b"{a}b}:timeout"), 15495);
        assert!(latch_channel_same_slot(b"x"));
        assert!(!latch_channel_same_slot(b"{x}"));
        assert_eq!(key_slot(b"redisson_countdownlatch__channel__{{x}}"), 11068);
    }

    #[test]
    fn rwlock_timeout_keys() {
        use crate::channel::rwlock_timeout_key;
        for key in [&b"x"[..], b"user:{42}:lock", b"{x}", b"a{b}c{d"] {
            assert!(rwlock_timeout_keys_same_slot(key), "{key:?}");
            for owner in [&b"o"[..], b"}", b"{z}", b"6e38:1"] {
                assert_eq!(
                    key_slot(&rwlock_timeout_key(key, owner, 7)),
                    key_slot(key),
                    "{key:?} {owner:?}"
                );
                assert!(rwlock_timeout_key_same_slot(key, owner));
            }
        }
        // REDISSON-FAMILY.md 0.3: `a}b` and `a{b` land elsewhere.
        for key in [&b"a}b"[..], b"a{b", b"{}x", b""] {
            assert!(!rwlock_timeout_keys_same_slot(key), "{key:?}");
            assert!(!rwlock_timeout_key_same_slot(key, b"u:1"), "{key:?}");
        }
        // With a `{` and no tag, the owner's `}` can close one.
        assert_eq!(key_slot(b"a{b:x}y:rwlock_timeout:1"), key_slot(b"b:x"));
        assert!(!rwlock_timeout_key_same_slot(b"a{b", b"x}y"));
        assert!(all_same_slot(&[b"{t}1", b"{t}2"]));
        assert!(!all_same_slot(&[&b"foo"[..], b"bar"]));
        assert!(all_same_slot::<&[u8]>(&[]));
    }
}
