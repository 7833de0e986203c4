//! Cluster key slots, computed here exactly as the servers do (CRC16-XMODEM
//! of the hash tag or the whole key, mod 16384), so tests can pick keys in
//! a chosen slot without asking a server thousands of times.

pub const SLOTS: u16 = 16384;

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as in
/// Redis's `crc16.c`.
pub fn crc16(bytes: &[u8]) -> u16 {
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

/// The part of the key that is hashed: the text between the first `{` and
/// the first `}` after it, if that is not empty; otherwise the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// `CLUSTER KEYSLOT key`.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// A hash tag (no braces) that lands in `slot`, from `prefix` plus a number:
/// wrap it in braces to put any key in that slot, e.g. `{tag}:lock`.
pub fn tag_for_slot(slot: u16, prefix: &str) -> String {
    assert!(slot < SLOTS, "slot {slot} out of range");
    (0u64..)
        .map(|i| format!("{prefix}{i}"))
        .find(|t| key_slot(t.as_bytes()) == slot)
        .expect("every slot is reached by some number")
}

/// A key in `slot`: `{<tag>}<suffix>`.
pub fn key_in_slot(slot: u16, prefix: &str, suffix: &str) -> String {
    format!("{{{}}}{suffix}", tag_for_slot(slot, prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_slots() {
        // Values from the Redis cluster specification and CLUSTER KEYSLOT.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"a{b"), b"a{b");
    }

    #[test]
    fn keys_land_in_their_slot() {
        for slot in [0, 1, 5460, 5461, 16383] {
            let k = key_in_slot(slot, "t", ":lock");
            assert_eq!(key_slot(k.as_bytes()), slot, "{k}");
        }
    }
}
