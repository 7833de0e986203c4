//! Parsing LOCK.* arguments into requests, and the option machinery every
//! command shares (SEMAPHORE.* and LATCH.* parse in their own modules).
//! Pure: arguments are anything that reads as bytes (`&[u8]` in tests,
//! Redis strings in the glue), and requests borrow them, so the hot path
//! copies nothing.
//!
//! Which options a command takes comes from the command table (`command`).
//! Options are case-insensitive and may come in any order; a repeated,
//! conflicting, unknown or value-less option is a syntax error.

pub use super::command::Command;
use super::command::Opt;
use super::error::{LockError, LockResult};
use super::lease::{Lease, Millis, NOT_POSITIVE};
use super::number::parse_i64;
use super::owner;
use super::rwlock::RwMode;

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

/// `REPLICAS n ms`: reply once `count` replicas acknowledged the call's
/// writes, or undo them after `timeout_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replicas {
    pub count: i64,
    pub timeout_ms: Millis,
}

impl Replicas {
    /// No waiting at all (`REPLICAS 0 ms`, or the default config).
    pub fn is_none(self) -> bool {
        self.count == 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireRequest<'a, A> {
    pub key: &'a A,
    pub owner: OwnerSpec<'a, A>,
    pub lease: Option<Lease>,
    pub block: Option<Block>,
    pub keepalive: bool,
    pub token: bool,
    pub replicas: Option<Replicas>,
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
    pub keepalive: bool,
    pub replicas: Option<Replicas>,
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
    let o = parse_options(Command::Acquire, options)?;
    Ok(AcquireRequest {
        key,
        owner,
        lease: o.lease,
        block: o.block,
        keepalive: o.keepalive,
        token: o.token,
        replicas: o.replicas,
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
    let o = parse_options(Command::Renew, options)?;
    Ok(RenewRequest {
        key,
        owner,
        lease: o.lease,
        keepalive: o.keepalive,
        replicas: o.replicas,
    })
}

pub fn parse_key<A: AsRef<[u8]>>(command: Command, args: &[A]) -> LockResult<KeyRequest<'_, A>> {
    let [key] = args else {
        return Err(LockError::Arity(command));
    };
    Ok(KeyRequest { key })
}

/// The options after a command's fixed arguments, as parsed.
#[derive(Default)]
pub(crate) struct Options {
    pub(crate) lease: Option<Lease>,
    pub(crate) block: Option<Block>,
    pub(crate) keepalive: bool,
    pub(crate) token: bool,
    pub(crate) replicas: Option<Replicas>,
    /// `COUNT n`, n ≥ 1.
    pub(crate) count: Option<i64>,
    /// `READ | WRITE` (RW locks).
    pub(crate) mode: Option<RwMode>,
}

/// Which option a word names, if the command takes it.
fn option_named(command: Command, word: &[u8]) -> Option<Opt> {
    let is = |w: &[u8]| word.eq_ignore_ascii_case(w);
    // By length first: this runs for every option of every call.
    let opt = match word.len() {
        2 if is(b"PX") || is(b"EX") => Opt::Lease,
        5 if is(b"BLOCK") => Opt::Block,
        5 if is(b"TOKEN") => Opt::Token,
        5 if is(b"COUNT") => Opt::Count,
        8 if is(b"REPLICAS") => Opt::Replicas,
        9 if is(b"KEEPALIVE") => Opt::KeepAlive,
        4 if is(b"READ") => Opt::Mode,
        5 if is(b"WRITE") => Opt::Mode,
        _ => return None,
    };
    command.takes(opt).then_some(opt)
}

/// An option a command refuses with its own message rather than a syntax
/// error: KEEPALIVE on SEMAPHORE.ACQUIRE (anonymous permits have nothing to
/// tie).
fn refused(command: Command, word: &[u8]) -> Option<LockError> {
    (command == Command::SemAcquire && word.eq_ignore_ascii_case(b"KEEPALIVE")).then_some(
        LockError::NotHere(
            "KEEPALIVE is for leased permits: anonymous permits have nothing to tie (use SEMAPHORE.LEASE)",
        ),
    )
}

pub(crate) fn parse_options<A: AsRef<[u8]>>(
    command: Command,
    mut rest: &[A],
) -> LockResult<Options> {
    let mut o = Options::default();
    while let [name, tail @ ..] = rest {
        let name = name.as_ref();
        let Some(opt) = option_named(command, name) else {
            if let Some(e) = refused(command, name) {
                return Err(e);
            }
            return Err(LockError::Syntax(if command.spec().options.is_empty() {
                "this command takes no options"
            } else {
                command.spec().expected
            }));
        };
        rest = match opt {
            Opt::KeepAlive => {
                if std::mem::replace(&mut o.keepalive, true) {
                    return Err(LockError::Syntax("KEEPALIVE given more than once"));
                }
                tail
            }
            Opt::Mode => {
                let mode = match name.len() {
                    4 => RwMode::Read,
                    _ => RwMode::Write,
                };
                if o.mode.replace(mode).is_some() {
                    return Err(LockError::Syntax("give one mode: READ or WRITE, once"));
                }
                tail
            }
            Opt::Token => {
                if std::mem::replace(&mut o.token, true) {
                    return Err(LockError::Syntax("TOKEN given more than once"));
                }
                tail
            }
            Opt::Count => {
                let [value, tail @ ..] = tail else {
                    return Err(LockError::Syntax("option without a value"));
                };
                if o.count.is_some() {
                    return Err(LockError::Syntax("COUNT given more than once"));
                }
                o.count = Some(parse_count(value.as_ref())?);
                tail
            }
            Opt::Replicas => {
                let [count, ms, tail @ ..] = tail else {
                    return Err(LockError::Syntax("REPLICAS takes two values: n ms"));
                };
                if o.replicas.is_some() {
                    return Err(LockError::Syntax("REPLICAS given more than once"));
                }
                o.replicas = Some(parse_replicas(count.as_ref(), ms.as_ref())?);
                tail
            }
            Opt::Lease | Opt::Block => {
                let [value, tail @ ..] = tail else {
                    return Err(LockError::Syntax("option without a value"));
                };
                let value = value.as_ref();
                if opt == Opt::Block {
                    if o.block.is_some() {
                        return Err(LockError::Syntax("BLOCK given more than once"));
                    }
                    o.block = Some(parse_block(value)?);
                } else {
                    if o.lease.is_some() {
                        return Err(LockError::Syntax("give one lease: PX ms or EX s, once"));
                    }
                    let n = parse_i64(value).ok_or(NOT_POSITIVE)?;
                    o.lease = Some(if name.eq_ignore_ascii_case(b"PX") {
                        Lease::from_millis(n)?
                    } else {
                        Lease::from_secs(n)?
                    });
                }
                tail
            }
        };
    }
    Ok(o)
}

/// `COUNT n`: a positive integer.
pub(crate) fn parse_count(value: &[u8]) -> LockResult<i64> {
    match parse_i64(value) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(LockError::Invalid(
            "invalid COUNT: must be a positive integer",
        )),
    }
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

/// Most replicas a call can wait for: more than any real deployment has.
pub const MAX_REPLICAS: i64 = 1_000_000;

fn parse_replicas(count: &[u8], ms: &[u8]) -> LockResult<Replicas> {
    let count = match parse_i64(count) {
        Some(n) if (0..=MAX_REPLICAS).contains(&n) => n,
        _ => {
            return Err(LockError::BadReplicas(
                "n must be an integer from 0 to 1000000",
            ));
        }
    };
    let timeout_ms = match parse_i64(ms) {
        Some(n) if n > 0 => n,
        _ => return Err(LockError::BadReplicas("ms must be a positive integer")),
    };
    Ok(Replicas { count, timeout_ms })
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

impl Replicas {
    /// Refuses a timeout whose absolute end would overflow the clock.
    pub fn check(self, now: Millis) -> LockResult<Replicas> {
        match now.checked_add(self.timeout_ms) {
            Some(_) => Ok(self),
            None => Err(LockError::BadReplicas("ms is out of range")),
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
                LockError::Syntax(
                    "unknown option, expected PX ms, EX s, BLOCK ms, KEEPALIVE, TOKEN or REPLICAS n ms",
                ),
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
            Some(LockError::Syntax(
                "unknown option, expected PX ms, EX s, KEEPALIVE or REPLICAS n ms"
            ))
        );
        assert!(parse_key(Command::Info, &args("k")).is_ok());
        assert_eq!(
            parse_key(Command::ForceRelease, &args("k j")).err(),
            Some(LockError::Arity(Command::ForceRelease))
        );
    }

    #[test]
    fn keepalive_token_replicas() {
        let a = args("k o keepalive TOKEN replicas 2 150 px 10");
        let r = parse_acquire(&a).unwrap();
        assert!(r.keepalive && r.token);
        assert_eq!(
            r.replicas,
            Some(Replicas {
                count: 2,
                timeout_ms: 150
            })
        );
        let a = args("k o");
        let r = parse_acquire(&a).unwrap();
        assert!(!r.keepalive && !r.token && r.replicas.is_none());
        let a = args("k o KeepAlive REPLICAS 0 1");
        let r = parse_renew(&a).unwrap();
        assert!(r.keepalive);
        assert!(r.replicas.unwrap().is_none());
        let cases = [
            (
                "k o KEEPALIVE KEEPALIVE",
                LockError::Syntax("KEEPALIVE given more than once"),
            ),
            (
                "k o TOKEN token",
                LockError::Syntax("TOKEN given more than once"),
            ),
            (
                "k o REPLICAS 1",
                LockError::Syntax("REPLICAS takes two values: n ms"),
            ),
            (
                "k o REPLICAS 1 10 REPLICAS 1 10",
                LockError::Syntax("REPLICAS given more than once"),
            ),
            (
                "k o REPLICAS -1 10",
                LockError::BadReplicas("n must be an integer from 0 to 1000000"),
            ),
            (
                "k o REPLICAS x 10",
                LockError::BadReplicas("n must be an integer from 0 to 1000000"),
            ),
            (
                "k o REPLICAS 1 0",
                LockError::BadReplicas("ms must be a positive integer"),
            ),
            (
                "k o REPLICAS 1 -5",
                LockError::BadReplicas("ms must be a positive integer"),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse_acquire(&args(input)).err(), Some(want), "{input}");
        }
        // RENEW takes no TOKEN or BLOCK.
        for input in ["k o TOKEN", "k o BLOCK 1"] {
            assert_eq!(
                parse_renew(&args(input)).err(),
                Some(LockError::Syntax(
                    "unknown option, expected PX ms, EX s, KEEPALIVE or REPLICAS n ms"
                )),
                "{input}"
            );
        }
        assert!(
            Replicas {
                count: 1,
                timeout_ms: i64::MAX
            }
            .check(1)
            .is_err()
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
            Just(b"KEEPALIVE".to_vec()),
            Just(b"token".to_vec()),
            Just(b"Replicas".to_vec()),
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
                let words = 2 + 2 * usize::from(r.lease.is_some())
                    + 2 * usize::from(r.block.is_some())
                    + usize::from(r.keepalive)
                    + usize::from(r.token)
                    + 3 * usize::from(r.replicas.is_some());
                prop_assert_eq!(input.len(), words);
                prop_assert!(!input[1].is_empty() && input[1].len() <= 1024);
                if let Some(lease) = r.lease { prop_assert!(lease.millis() > 0); }
                if let Some(Block { timeout_ms: Some(ms) }) = r.block { prop_assert!(ms > 0); }
            }
            if let Ok(r) = parse_renew(&input) {
                let words = 2 + 2 * usize::from(r.lease.is_some())
                    + usize::from(r.keepalive)
                    + 3 * usize::from(r.replicas.is_some());
                prop_assert_eq!(input.len(), words);
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
