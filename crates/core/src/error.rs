//! The one error type of hashlock. Every refusal a client can see is a
//! `LockError`; the glue turns it into a Redis error reply in exactly one
//! place (`glue::reply::error`). The first word of each message is the Redis
//! error code, so clients and `INFO errorstats` can tell them apart.

use std::borrow::Cow;
use std::fmt;

use super::request::Command;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockError {
    /// Wrong number of arguments (same text Redis uses for its own commands).
    Arity(Command),
    /// Unknown, repeated or conflicting option.
    Syntax(&'static str),
    /// PX/EX not a positive integer, or a deadline that would overflow.
    BadLease(&'static str),
    /// Owner empty or longer than `MAX_OWNER_LEN`.
    BadOwner,
    /// BLOCK not a non-negative integer, or out of range.
    BadTimeout(&'static str),
    /// The key holds something other than a hash.
    WrongType,
    /// RELEASE by an owner that does not hold the lock. Loud on purpose: a
    /// lost lease must never pass silently.
    NotOwner,
    /// The key holds a hash that is not a lock (several fields, or a hold
    /// count that is not a positive integer).
    NotLock,
    /// Re-entering would overflow the hold count (as HINCRBY would).
    HoldOverflow,
    /// A bug inside the module, caught by the panic firewall.
    Internal(String),
}

impl LockError {
    /// The Redis error code: the first word of the reply.
    pub fn code(&self) -> &'static str {
        match self {
            LockError::WrongType => "WRONGTYPE",
            LockError::NotOwner => "NOTOWNER",
            LockError::NotLock => "NOTLOCK",
            _ => "ERR",
        }
    }

    /// The full error text, code first, as sent to the client.
    pub fn message(&self) -> Cow<'static, str> {
        match self {
            LockError::Arity(cmd) => Cow::Owned(format!(
                "ERR wrong number of arguments for '{}' command",
                cmd.name()
            )),
            LockError::Syntax(why) => Cow::Owned(format!("ERR syntax error: {why}")),
            LockError::BadLease(why) => Cow::Owned(format!("ERR invalid lease: {why}")),
            LockError::BadOwner => Cow::Borrowed("ERR invalid owner: must be 1 to 1024 bytes"),
            LockError::BadTimeout(why) => Cow::Owned(format!("ERR invalid BLOCK timeout: {why}")),
            LockError::WrongType => {
                Cow::Borrowed("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            LockError::NotOwner => Cow::Borrowed(
                "NOTOWNER lock not held by this owner (expired, released or never acquired)",
            ),
            LockError::NotLock => Cow::Borrowed(
                "NOTLOCK key holds a hash that is not a lock (one field with a positive integer hold count expected)",
            ),
            LockError::HoldOverflow => Cow::Borrowed("ERR hold count would overflow"),
            LockError::Internal(what) => Cow::Owned(format!(
                "ERR internal error in the lock module: {what} (details in the server log)"
            )),
        }
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for LockError {}

pub type LockResult<T> = Result<T, LockError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_starts_with_its_code() {
        let all = [
            LockError::Arity(Command::Acquire),
            LockError::Syntax("x"),
            LockError::BadLease("x"),
            LockError::BadOwner,
            LockError::BadTimeout("x"),
            LockError::WrongType,
            LockError::NotOwner,
            LockError::NotLock,
            LockError::HoldOverflow,
            LockError::Internal("x".into()),
        ];
        for e in all {
            let msg = e.message();
            assert!(msg.starts_with(&format!("{} ", e.code())), "{msg}");
            assert!(!msg.contains('\n') && !msg.contains('\r'), "{msg}");
        }
    }

    #[test]
    fn arity_text_matches_redis() {
        assert_eq!(
            LockError::Arity(Command::Release).message(),
            "ERR wrong number of arguments for 'lock.release' command"
        );
    }
}
