//! String-valued objects (a semaphore's permit count, a latch's count): what
//! the key holds, before a primitive reads its number.

use super::error::{LockError, LockResult};
use super::number::parse_i64;

/// What a key holds, as GET sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringValue<V> {
    Missing,
    Str(V),
    /// Any type other than a string.
    Other,
}

impl<V: AsRef<[u8]>> StringValue<V> {
    /// The integer at the key as INCRBY reads it: `None` when there is no
    /// key, WRONGTYPE for another type, `not_integer` for a string INCRBY
    /// would refuse.
    pub fn integer(&self, not_integer: LockError) -> LockResult<Option<i64>> {
        match self {
            StringValue::Missing => Ok(None),
            StringValue::Str(v) => parse_i64(v.as_ref()).map(Some).ok_or(not_integer),
            StringValue::Other => Err(LockError::WrongType),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_incrby_does() {
        let not = || LockError::NotLatch;
        assert_eq!(StringValue::<&[u8]>::Missing.integer(not()), Ok(None));
        assert_eq!(StringValue::Str(&b"-3"[..]).integer(not()), Ok(Some(-3)));
        assert_eq!(StringValue::Str(&b"03"[..]).integer(not()), Err(not()));
        assert_eq!(StringValue::Str(&b""[..]).integer(not()), Err(not()));
        assert_eq!(
            StringValue::<&[u8]>::Other.integer(not()),
            Err(LockError::WrongType)
        );
    }
}
