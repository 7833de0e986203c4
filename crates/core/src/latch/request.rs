//! Parsing LATCH.* arguments. LATCH.COUNTDOWN and LATCH.COUNT take only the
//! key: `request::parse_key`.

use crate::command::Command;
use crate::error::{LockError, LockResult};
use crate::number::parse_i64;
use crate::request::{Block, parse_options};

/// `LATCH.CREATE key count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateRequest<'a, A> {
    pub key: &'a A,
    /// ≥ 1.
    pub count: i64,
}

/// `LATCH.AWAIT key [BLOCK ms]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AwaitRequest<'a, A> {
    pub key: &'a A,
    pub block: Option<Block>,
}

pub fn parse_create<A: AsRef<[u8]>>(args: &[A]) -> LockResult<CreateRequest<'_, A>> {
    let [key, count] = args else {
        return Err(LockError::Arity(Command::LatchCreate));
    };
    let count = parse_i64(count.as_ref())
        .filter(|&n| n >= 1)
        .ok_or(LockError::Invalid(
            "invalid count: must be a positive integer",
        ))?;
    Ok(CreateRequest { key, count })
}

pub fn parse_await<A: AsRef<[u8]>>(args: &[A]) -> LockResult<AwaitRequest<'_, A>> {
    let [key, options @ ..] = args else {
        return Err(LockError::Arity(Command::LatchAwait));
    };
    let o = parse_options(Command::LatchAwait, options)?;
    Ok(AwaitRequest {
        key,
        block: o.block,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::parse_key;

    fn args(s: &str) -> Vec<Vec<u8>> {
        s.split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| w.as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn forms_and_errors() {
        assert_eq!(parse_create(&args("l 3")).unwrap().count, 3);
        let bad = LockError::Invalid("invalid count: must be a positive integer");
        for (input, want) in [
            ("l", LockError::Arity(Command::LatchCreate)),
            ("l 1 2", LockError::Arity(Command::LatchCreate)),
            ("l 0", bad.clone()),
            ("l -1", bad.clone()),
            ("l +1", bad),
        ] {
            assert_eq!(parse_create(&args(input)).err(), Some(want), "{input}");
        }
        assert_eq!(parse_await(&args("l")).unwrap().block, None);
        assert_eq!(
            parse_await(&args("l block 0")).unwrap().block,
            Some(Block { timeout_ms: None })
        );
        assert_eq!(
            parse_await(&args("l BLOCK 5 BLOCK 5")).err(),
            Some(LockError::Syntax("BLOCK given more than once"))
        );
        assert_eq!(
            parse_await(&args("l PX 5")).err(),
            Some(LockError::Syntax("unknown option, expected BLOCK ms"))
        );
        assert_eq!(
            parse_await(&args("")).err(),
            Some(LockError::Arity(Command::LatchAwait))
        );
        assert!(parse_key(Command::LatchCountDown, &args("l")).is_ok());
        assert_eq!(
            parse_key(Command::LatchCount, &args("l x")).err(),
            Some(LockError::Arity(Command::LatchCount))
        );
    }
}
