//! Parsing RWLOCK.* arguments, with the option machinery of LOCK.*
//! (`request::parse_options`): options (READ | WRITE among them) in any
//! order and case; repeated, conflicting, unknown or value-less options are
//! syntax errors. Owners are checked for length, then for the names an RW
//! lock cannot tell apart (`mode`, `...:write`).

use super::{RwMode, check_owner};
use crate::command::Command;
use crate::error::{LockError, LockResult};
use crate::lease::Lease;
use crate::owner;
use crate::request::{Block, KeyRequest, OwnerSpec, RenewRequest, Replicas, parse_options};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RwAcquireRequest<'a, A> {
    pub key: &'a A,
    pub owner: OwnerSpec<'a, A>,
    pub mode: RwMode,
    pub lease: Option<Lease>,
    pub block: Option<Block>,
    pub keepalive: bool,
    /// WRITE only.
    pub token: bool,
    pub replicas: Option<Replicas>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RwReleaseRequest<'a, A> {
    pub key: &'a A,
    pub owner: &'a A,
    pub mode: RwMode,
}

const MODE_REQUIRED: LockError = LockError::Syntax("READ or WRITE is required");

fn rw_owner(owner: &[u8]) -> LockResult<()> {
    owner::validate(owner)?;
    check_owner(owner)
}

/// `RWLOCK.ACQUIRE key owner READ|WRITE [PX ms | EX s] [BLOCK ms]
/// [KEEPALIVE] [TOKEN] [REPLICAS n ms]` (arguments after the command name).
pub fn parse_rw_acquire<A: AsRef<[u8]>>(args: &[A]) -> LockResult<RwAcquireRequest<'_, A>> {
    let [key, owner_arg, options @ ..] = args else {
        return Err(LockError::Arity(Command::RwAcquire));
    };
    if options.is_empty() {
        return Err(LockError::Arity(Command::RwAcquire));
    }
    let owner = owner_arg.as_ref();
    rw_owner(owner)?;
    let owner = if owner::is_reserved(owner) {
        OwnerSpec::Generate
    } else {
        OwnerSpec::Given(owner_arg)
    };
    let o = parse_options(Command::RwAcquire, options)?;
    let mode = o.mode.ok_or(MODE_REQUIRED)?;
    if o.token && mode == RwMode::Read {
        return Err(LockError::Syntax("TOKEN is allowed with WRITE only"));
    }
    Ok(RwAcquireRequest {
        key,
        owner,
        mode,
        lease: o.lease,
        block: o.block,
        keepalive: o.keepalive,
        token: o.token,
        replicas: o.replicas,
    })
}

/// `RWLOCK.RELEASE key owner READ|WRITE`.
pub fn parse_rw_release<A: AsRef<[u8]>>(args: &[A]) -> LockResult<RwReleaseRequest<'_, A>> {
    let [key, owner, mode] = args else {
        return Err(LockError::Arity(Command::RwRelease));
    };
    rw_owner(owner.as_ref())?;
    let o = parse_options(Command::RwRelease, std::slice::from_ref(mode))?;
    Ok(RwReleaseRequest {
        key,
        owner,
        mode: o.mode.ok_or(MODE_REQUIRED)?,
    })
}

/// `RWLOCK.RENEW key owner [PX ms | EX s] [KEEPALIVE] [REPLICAS n ms]`.
pub fn parse_rw_renew<A: AsRef<[u8]>>(args: &[A]) -> LockResult<RenewRequest<'_, A>> {
    let [key, owner, options @ ..] = args else {
        return Err(LockError::Arity(Command::RwRenew));
    };
    rw_owner(owner.as_ref())?;
    let o = parse_options(Command::RwRenew, options)?;
    Ok(RenewRequest {
        key,
        owner,
        lease: o.lease,
        keepalive: o.keepalive,
        replicas: o.replicas,
    })
}

/// `RWLOCK.INFO key` and `RWLOCK.FORCERELEASE key`.
pub fn parse_rw_key<A: AsRef<[u8]>>(command: Command, args: &[A]) -> LockResult<KeyRequest<'_, A>> {
    crate::request::parse_key(command, args)
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
        let a = args("k o READ");
        let r = parse_rw_acquire(&a).unwrap();
        assert_eq!(r.mode, RwMode::Read);
        assert_eq!(r.owner, OwnerSpec::Given(&b"o".to_vec()));
        assert!(r.lease.is_none() && r.block.is_none() && !r.token);

        let a = args("k * px 100 write Block 0 keepalive TOKEN replicas 1 50");
        let r = parse_rw_acquire(&a).unwrap();
        assert_eq!(r.mode, RwMode::Write);
        assert_eq!(r.owner, OwnerSpec::Generate);
        assert_eq!(r.lease, Some(Lease::from_millis(100).unwrap()));
        assert_eq!(r.block, Some(Block { timeout_ms: None }));
        assert!(r.keepalive && r.token);
        assert_eq!(
            r.replicas,
            Some(Replicas {
                count: 1,
                timeout_ms: 50
            })
        );
    }

    #[test]
    fn acquire_errors() {
        let cases = [
            ("", LockError::Arity(Command::RwAcquire)),
            ("k", LockError::Arity(Command::RwAcquire)),
            ("k o", LockError::Arity(Command::RwAcquire)),
            ("k o PX 10", LockError::Syntax("READ or WRITE is required")),
            (
                "k o READ WRITE",
                LockError::Syntax("give one mode: READ or WRITE, once"),
            ),
            (
                "k o read READ",
                LockError::Syntax("give one mode: READ or WRITE, once"),
            ),
            (
                "k o READ TOKEN",
                LockError::Syntax("TOKEN is allowed with WRITE only"),
            ),
            (
                "k o READ NX",
                LockError::Syntax(
                    "unknown option, expected READ, WRITE, PX ms, EX s, BLOCK ms, KEEPALIVE, TOKEN or REPLICAS n ms",
                ),
            ),
            (
                "k o WRITE PX 0",
                LockError::BadLease("PX and EX take a positive integer"),
            ),
            ("k mode READ", LockError::RwOwner),
            ("k a:write WRITE", LockError::RwOwner),
            ("k :write READ", LockError::RwOwner),
        ];
        for (input, want) in cases {
            assert_eq!(parse_rw_acquire(&args(input)).err(), Some(want), "{input}");
        }
        // Close to the reserved names, but not them.
        for owner in ["Mode", "modes", "a:Write", "a:write:", "write", ":writ"] {
            let a = args(&format!("k {owner} READ"));
            assert!(parse_rw_acquire(&a).is_ok(), "{owner}");
        }
        let long = vec![b"k".to_vec(), vec![b'o'; 1025], b"READ".to_vec()];
        assert_eq!(parse_rw_acquire(&long).err(), Some(LockError::BadOwner));
    }

    #[test]
    fn release_renew_key() {
        let a = args("k o write");
        assert_eq!(parse_rw_release(&a).unwrap().mode, RwMode::Write);
        let cases = [
            ("k o", LockError::Arity(Command::RwRelease)),
            ("k o READ x", LockError::Arity(Command::RwRelease)),
            (
                "k o PX",
                LockError::Syntax("unknown option, expected READ or WRITE"),
            ),
            ("k mode READ", LockError::RwOwner),
            ("k x:write WRITE", LockError::RwOwner),
        ];
        for (input, want) in cases {
            assert_eq!(parse_rw_release(&args(input)).err(), Some(want), "{input}");
        }
        let a = args("k o EX 2 KEEPALIVE");
        let r = parse_rw_renew(&a).unwrap();
        assert_eq!(r.lease.unwrap().millis(), 2000);
        assert!(r.keepalive);
        assert_eq!(
            parse_rw_renew(&args("k o READ")).err(),
            Some(LockError::Syntax(
                "unknown option, expected PX ms, EX s, KEEPALIVE or REPLICAS n ms"
            ))
        );
        assert_eq!(
            parse_rw_renew(&args("k mode")).err(),
            Some(LockError::RwOwner)
        );
        assert_eq!(
            parse_rw_renew(&args("k")).err(),
            Some(LockError::Arity(Command::RwRenew))
        );
        assert!(parse_rw_key(Command::RwInfo, &args("k")).is_ok());
        assert_eq!(
            parse_rw_key(Command::RwForceRelease, &args("k x")).err(),
            Some(LockError::Arity(Command::RwForceRelease))
        );
        // LOCK.* takes no mode.
        assert!(crate::request::parse_acquire(&args("k o READ")).is_err());
    }

    fn word() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"READ".to_vec()),
            Just(b"write".to_vec()),
            Just(b"PX".to_vec()),
            Just(b"Block".to_vec()),
            Just(b"KEEPALIVE".to_vec()),
            Just(b"token".to_vec()),
            Just(b"Replicas".to_vec()),
            Just(b"mode".to_vec()),
            Just(b"x:write".to_vec()),
            Just(b"*".to_vec()),
            "-?[0-9]{1,21}".prop_map(|s| s.into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..40),
        ]
    }

    proptest! {
        // Whatever arrives, parsing answers (never panics), and what it
        // accepts is consistent with the words given.
        #[test]
        fn parsing_never_panics(input in proptest::collection::vec(word(), 0..9)) {
            if let Ok(r) = parse_rw_acquire(&input) {
                let words = 3 + 2 * usize::from(r.lease.is_some())
                    + 2 * usize::from(r.block.is_some())
                    + usize::from(r.keepalive)
                    + usize::from(r.token)
                    + 3 * usize::from(r.replicas.is_some());
                prop_assert_eq!(input.len(), words);
                prop_assert!(check_owner(&input[1]).is_ok());
                prop_assert!(!r.token || r.mode == RwMode::Write);
            }
            if let Ok(r) = parse_rw_release(&input) {
                prop_assert_eq!(input.len(), 3);
                prop_assert!(check_owner(r.owner).is_ok());
            }
            if parse_rw_renew(&input).is_ok() {
                prop_assert!(check_owner(&input[1]).is_ok());
            }
        }
    }
}
