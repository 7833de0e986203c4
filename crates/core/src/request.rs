//! Parsing LOCK.* arguments into requests. Pure: arguments are anything that
//! reads as bytes (`&[u8]` in tests, Redis strings in the glue), and requests
//! borrow them, so the hot path copies nothing.
//!
//! Options are case-insensitive and may come in any order; a repeated,
//! conflicting, unknown or value-less option is a syntax error.

use super::error::{LockError, LockResult};
use super::lease::{Lease, Millis, NOT_POSITIVE};
use super::number::parse_i64;
use super::owner;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Acquire,
    Release,
    Renew,
    Info,
    ForceRelease,
}

impl Command {
    pub fn name(self) -> &'static str {
        match self {
            Command::Acquire => "lock.acquire",
            Command::Release => "lock.release",
            Command::Renew => "lock.renew",
            Command::Info => "lock.info",
            Command::ForceRelease => "lock.forcerelease",
        }
    }

    /// Redis arity, command name included (negative: at least that many).
    pub fn arity(self) -> i32 {
        match self {
            Command::Acquire | Command::Renew => -3,
            Command::Release => 3,
            Command::Info | Command::ForceRelease => 2,
        }
    }
}

/// Who asks for the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerSpec<'a, A> {
    Given(&'a A),
    /// `*`: the server generates a UUID and replies with it.
    Generate,
}

/// `BLOCK ms`: how long to wait in the queue; `None` inside means forever (0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub timeout_ms: Option<Millis>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireRequest<'a, A> {
    pub key: &'a A,
    pub owner: OwnerSpec<'a, A>,
    pub lease: Option<Lease>,
    pub block: Option<Block>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseRequest<'a, A> {
    pub key: &'a A,
    pub owner: &'a A,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenewRequest<'a, A> {
    pub key: &'a A,
    pub owner: &'a A,
    pub lease: Option<Lease>,
}

/// LOCK.INFO and LOCK.FORCERELEASE take only the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRequest<'a, A> {
    pub key: &'a A,
}

/// `args` are the arguments after the command name.
pub fn parse_acquire<A: AsRef<[u8]>>(args: &[A]) -> LockResult<AcquireRequest<'_, A>> {
    let [key, owner_arg, options @ ..] = args else {
        return Err(LockError::Arity(Command::Acquire));
    };
    let owner = owner_arg.as_ref();
    owner::validate(owner)?;
    let owner = if owner::is_reserved(owner) {
        OwnerSpec::Generate
    } else {
        OwnerSpec::Given(owner_arg)
    };
    let options = parse_options(options, true)?;
    Ok(AcquireRequest {
        key,
        owner,
        lease: options.lease,
        block: options.block,
    })
}

pub fn parse_release<A: AsRef<[u8]>>(args: &[A]) -> LockResult<ReleaseRequest<'_, A>> {
    let [key, owner] = args else {
        return Err(LockError::Arity(Command::Release));
    };
    owner::validate(owner.as_ref())?;
    Ok(ReleaseRequest { key, owner })
}

pub fn parse_renew<A: AsRef<[u8]>>(args: &[A]) -> LockResult<RenewRequest<'_, A>> {
    let [key, owner, options @ ..] = args else {
        return Err(LockError::Arity(Command::Renew));
    };
    owner::validate(owner.as_ref())?;
    let options = parse_options(options, false)?;
    Ok(RenewRequest {
        key,
        owner,
        lease: options.lease,
    })
}

pub fn parse_key<A: AsRef<[u8]>>(command: Command, args: &[A]) -> LockResult<KeyRequest<'_, A>> {
    let [key] = args else {
        return Err(LockError::Arity(command));
    };
    Ok(KeyRequest { key })
}

#[derive(Default)]
struct Options {
    lease: Option<Lease>,
    block: Option<Block>,
}

fn parse_options<A: AsRef<[u8]>>(mut rest: &[A], allow_block: bool) -> LockResult<Options> {
    let mut options = Options::default();
    while let [name, tail @ ..] = rest {
        let name = name.as_ref();
        let is = |word: &str| name.eq_ignore_ascii_case(word.as_bytes());
        let (px, ex, block) = (is("PX"), is("EX"), allow_block && is("BLOCK"));
        if !(px || ex || block) {
            return Err(LockError::Syntax(if allow_block {
                "unknown option, expected PX ms, EX s or BLOCK ms"
            } else {
                "unknown option, expected PX ms or EX s"
            }));
        }
        let [value, tail @ ..] = tail else {
            return Err(LockError::Syntax("option without a value"));
        };
        let value = value.as_ref();
        if block {
            if options.block.is_some() {
                return Err(LockError::Syntax("BLOCK given more than once"));
            }
            options.block = Some(parse_block(value)?);
        } else {
            if options.lease.is_some() {
                return Err(LockError::Syntax("give one lease: PX ms or EX s, once"));
            }
            let n = parse_i64(value).ok_or(NOT_POSITIVE)?;
            options.lease = Some(if px {
                Lease::from_millis(n)?
            } else {
                Lease::from_secs(n)?
            });
        }
        rest = tail;
    }
    Ok(options)
}

fn parse_block(value: &[u8]) -> LockResult<Block> {
    match parse_i64(value) {
        None => Err(LockError::BadTimeout("not an integer or out of range")),
        Some(n) if n < 0 => Err(LockError::BadTimeout("timeout is negative")),
        Some(0) => Ok(Block { timeout_ms: None }),
        Some(n) => Ok(Block {
            timeout_ms: Some(n),
        }),
    }
}

impl Block {
    /// Refuses a timeout whose absolute end would overflow the clock.
    pub fn check(self, now: Millis) -> LockResult<Block> {
        match self.timeout_ms {
            Some(ms) if now.checked_add(ms).is_none() => {
                Err(LockError::BadTimeout("timeout is out of range"))
            }
            _ => Ok(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn args(s: &str) -> Vec<Vec<u8>> {
        s.split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| w.as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn acquire_forms() {
        let a = args("k o");
        let r = parse_acquire(&a).unwrap();
        assert_eq!(r.key, &b"k".to_vec());
        assert_eq!(r.owner, OwnerSpec::Given(&b"o".to_vec()));
        assert_eq!((r.lease, r.block), (None, None));

        let a = args("k o block 0 px 250");
        let r = parse_acquire(&a).unwrap();
        assert_eq!(r.lease, Some(Lease::from_millis(250).unwrap()));
        assert_eq!(r.block, Some(Block { timeout_ms: None }));

        let a = args("k * Ex 2 BLOCK 15");
        let r = parse_acquire(&a).unwrap();
        assert_eq!(r.owner, OwnerSpec::Generate);
        assert_eq!(r.lease.unwrap().millis(), 2000);
        assert_eq!(
            r.block,
            Some(Block {
                timeout_ms: Some(15)
            })
        );
    }

    #[test]
    fn acquire_errors() {
        let cases = [
            ("k", LockError::Arity(Command::Acquire)),
            ("", LockError::Arity(Command::Acquire)),
            ("k o PX", LockError::Syntax("option without a value")),
            (
                "k o PX 10 EX 1",
                LockError::Syntax("give one lease: PX ms or EX s, once"),
            ),
            (
                "k o PX 10 PX 10",
                LockError::Syntax("give one lease: PX ms or EX s, once"),
            ),
            (
                "k o BLOCK 1 BLOCK 1",
                LockError::Syntax("BLOCK given more than once"),
            ),
            (
                "k o NX",
                LockError::Syntax("unknown option, expected PX ms, EX s or BLOCK ms"),
            ),
            (
                "k o PX 0",
                LockError::BadLease("PX and EX take a positive integer"),
            ),
            (
                "k o PX -1",
                LockError::BadLease("PX and EX take a positive integer"),
            ),
            (
                "k o PX 1.5",
                LockError::BadLease("PX and EX take a positive integer"),
            ),
            (
                "k o EX 9223372036854776",
                LockError::BadLease("deadline would overflow"),
            ),
            (
                "k o PX 99999999999999999999",
                LockError::BadLease("PX and EX take a positive integer"),
            ),
            ("k o BLOCK -1", LockError::BadTimeout("timeout is negative")),
            (
                "k o BLOCK x",
                LockError::BadTimeout("not an integer or out of range"),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse_acquire(&args(input)).err(), Some(want), "{input}");
        }
        let long_owner = vec![b"k".to_vec(), vec![b'o'; 1025]];
        assert_eq!(parse_acquire(&long_owner).err(), Some(LockError::BadOwner));
        let empty_owner = vec![b"k".to_vec(), vec![]];
        assert_eq!(parse_acquire(&empty_owner).err(), Some(LockError::BadOwner));
    }

    #[test]
    fn other_commands() {
        assert!(parse_release(&args("k o")).is_ok());
        assert_eq!(
            parse_release(&args("k o x")).err(),
            Some(LockError::Arity(Command::Release))
        );
        assert_eq!(
            parse_release(&args("k")).err(),
            Some(LockError::Arity(Command::Release))
        );
        assert_eq!(
            parse_renew(&args("k o ex 5"))
                .unwrap()
                .lease
                .unwrap()
                .millis(),
            5000
        );
        assert_eq!(
            parse_renew(&args("k o BLOCK 5")).err(),
            Some(LockError::Syntax("unknown option, expected PX ms or EX s"))
        );
        assert!(parse_key(Command::Info, &args("k")).is_ok());
        assert_eq!(
            parse_key(Command::ForceRelease, &args("k j")).err(),
            Some(LockError::Arity(Command::ForceRelease))
        );
    }

    #[test]
    fn block_range() {
        let b = Block {
            timeout_ms: Some(i64::MAX),
        };
        assert!(b.check(1).is_err());
        assert!(b.check(0).is_ok());
        assert!(Block { timeout_ms: None }.check(i64::MAX).is_ok());
    }

    fn word() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"PX".to_vec()),
            Just(b"ex".to_vec()),
            Just(b"Block".to_vec()),
            Just(b"*".to_vec()),
            "-?[0-9]{1,21}".prop_map(|s| s.into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..1100),
        ]
    }

    proptest! {
        // Whatever arrives, parsing answers with a request or an error (never a
        // panic), and an accepted request is consistent with its input.
        #[test]
        fn parsing_never_panics(input in proptest::collection::vec(word(), 0..8)) {
            if let Ok(r) = parse_acquire(&input) {
                prop_assert!(input.len() >= 2 && input.len() % 2 == 0);
                prop_assert!(!input[1].is_empty() && input[1].len() <= 1024);
                if let Some(lease) = r.lease { prop_assert!(lease.millis() > 0); }
                if let Some(Block { timeout_ms: Some(ms) }) = r.block { prop_assert!(ms > 0); }
            }
            if parse_renew(&input).is_ok() {
                prop_assert!(input.len() == 2 || input.len() == 4);
            }
            if parse_release(&input).is_ok() {
                prop_assert_eq!(input.len(), 2);
            }
        }

        // Option order and letter case never change the meaning.
        #[test]
        fn options_commute(px in 1i64..1_000_000, block in 0i64..1_000_000, upper: bool) {
            let px_s = px.to_string();
            let block_s = block.to_string();
            let (p, b) = if upper { ("PX", "BLOCK") } else { ("px", "block") };
            let a: Vec<&[u8]> = vec![b"k", b"o", p.as_bytes(), px_s.as_bytes(), b.as_bytes(), block_s.as_bytes()];
            let z: Vec<&[u8]> = vec![b"k", b"o", b.as_bytes(), block_s.as_bytes(), p.as_bytes(), px_s.as_bytes()];
            let ra = parse_acquire(&a).unwrap();
            let rz = parse_acquire(&z).unwrap();
            prop_assert_eq!((ra.lease, ra.block), (rz.lease, rz.block));
        }
    }
}
