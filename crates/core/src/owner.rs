//! Owners: who holds a lock. Binary-safe strings of 1..=1024 bytes; the
//! single byte `*` is reserved (ACQUIRE generates a fresh UUID for it, and no
//! lock is ever held by `*`).

use super::error::{LockError, LockResult};

pub const MAX_OWNER_LEN: usize = 1024;
pub const GENERATE: &[u8] = b"*";

/// Checks the owner's length; the reserved `*` passes (callers decide what it means).
pub fn validate(owner: &[u8]) -> LockResult<()> {
    if owner.is_empty() || owner.len() > MAX_OWNER_LEN {
        return Err(LockError::BadOwner);
    }
    Ok(())
}

/// `*`: never a holder.
pub fn is_reserved(owner: &[u8]) -> bool {
    owner == GENERATE
}

/// A fresh random owner (UUID v4, hyphenated lower case: 36 bytes).
pub fn generate() -> [u8; 36] {
    let mut buf = [0u8; 36];
    uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buf);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        assert!(validate(b"").is_err());
        assert!(validate(&[0u8; 1]).is_ok());
        assert!(validate(&[7u8; MAX_OWNER_LEN]).is_ok());
        assert!(validate(&[7u8; MAX_OWNER_LEN + 1]).is_err());
    }

    #[test]
    fn generated_owners_are_distinct_uuids() {
        let a = generate();
        let b = generate();
        assert_ne!(a, b);
        let text = std::str::from_utf8(&a).unwrap();
        let parsed = uuid::Uuid::parse_str(text).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
    }
}
