//! Parsing SEMAPHORE.* arguments into requests (borrowing them), with the
//! option machinery every command shares (`crate::request`). SEMAPHORE.INFO
//! and SEMAPHORE.DRAIN take only the key: `request::parse_key`.

use super::{LeaseClaim, MAX_LEASE_COUNT, PermitId, PermitIds, parse_id};
use crate::command::Command;
use crate::error::{LockError, LockResult};
use crate::lease::Lease;
use crate::number::parse_i64;
use crate::request::{Block, Replicas, parse_options};

/// `SEMAPHORE.CREATE key permits [PX ms | EX s]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateRequest<'a, A> {
    pub key: &'a A,
    /// ≥ 0.
    pub permits: i64,
    /// The key's TTL, if any.
    pub lease: Option<Lease>,
}

/// `SEMAPHORE.ADD key delta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddRequest<'a, A> {
    pub key: &'a A,
    /// Any integer.
    pub delta: i64,
}

/// `SEMAPHORE.ACQUIRE key [COUNT n] [BLOCK ms] [REPLICAS n ms]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireRequest<'a, A> {
    pub key: &'a A,
    /// ≥ 1 (1 without COUNT).
    pub count: i64,
    pub block: Option<Block>,
    pub replicas: Option<Replicas>,
}

/// `SEMAPHORE.RELEASE key [COUNT n]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseRequest<'a, A> {
    pub key: &'a A,
    /// ≥ 1 (1 without COUNT).
    pub count: i64,
}

/// `SEMAPHORE.LEASE key [COUNT n] [PX ms | EX s] [KEEPALIVE] [BLOCK ms]
/// [REPLICAS n ms]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRequest<'a, A> {
    pub key: &'a A,
    /// 1..=MAX_LEASE_COUNT (1 without COUNT).
    pub count: i64,
    /// PX/EX as given (see `claim` for the lease the permits get).
    pub lease: Option<Lease>,
    pub keepalive: bool,
    pub block: Option<Block>,
    pub replicas: Option<Replicas>,
}

impl<A> LeaseRequest<'_, A> {
    /// What the permits get: PX/EX as given; without it, no expiry, or
    /// `default_lease` (`lock.default-lease-ms`) with KEEPALIVE.
    pub fn claim(&self, default_lease: Lease) -> LeaseClaim {
        LeaseClaim {
            count: self.count,
            lease: self.lease.or(self.keepalive.then_some(default_lease)),
        }
    }
}

/// `SEMAPHORE.RETURN key id [id ...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnRequest<'a, A> {
    pub key: &'a A,
    pub ids: PermitIds,
}

/// `SEMAPHORE.RENEW key id [PX ms | EX s] [KEEPALIVE] [REPLICAS n ms]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenewRequest<'a, A> {
    pub key: &'a A,
    pub id: PermitId,
    /// PX/EX as given; `lease_or` gives the lease to set.
    pub lease: Option<Lease>,
    pub keepalive: bool,
    pub replicas: Option<Replicas>,
}

impl<A> RenewRequest<'_, A> {
    /// PX/EX as given, else `default_lease` (`lock.default-lease-ms`).
    pub fn lease_or(&self, default_lease: Lease) -> Lease {
        self.lease.unwrap_or(default_lease)
    }
}

pub fn parse_create<A: AsRef<[u8]>>(args: &[A]) -> LockResult<CreateRequest<'_, A>> {
    let [key, permits, options @ ..] = args else {
        return Err(LockError::Arity(Command::SemCreate));
    };
    let permits = parse_i64(permits.as_ref())
        .filter(|&n| n >= 0)
        .ok_or(LockError::Invalid(
            "invalid permits: must be a non-negative integer",
        ))?;
    let o = parse_options(Command::SemCreate, options)?;
    Ok(CreateRequest {
        key,
        permits,
        lease: o.lease,
    })
}

pub fn parse_add<A: AsRef<[u8]>>(args: &[A]) -> LockResult<AddRequest<'_, A>> {
    let [key, delta] = args else {
        return Err(LockError::Arity(Command::SemAdd));
    };
    let delta =
        parse_i64(delta.as_ref()).ok_or(LockError::Invalid("invalid delta: must be an integer"))?;
    Ok(AddRequest { key, delta })
}

pub fn parse_acquire<A: AsRef<[u8]>>(args: &[A]) -> LockResult<AcquireRequest<'_, A>> {
    let [key, options @ ..] = args else {
        return Err(LockError::Arity(Command::SemAcquire));
    };
    let o = parse_options(Command::SemAcquire, options)?;
    Ok(AcquireRequest {
        key,
        count: o.count.unwrap_or(1),
        block: o.block,
        replicas: o.replicas,
    })
}

pub fn parse_release<A: AsRef<[u8]>>(args: &[A]) -> LockResult<ReleaseRequest<'_, A>> {
    let [key, options @ ..] = args else {
        return Err(LockError::Arity(Command::SemRelease));
    };
    let o = parse_options(Command::SemRelease, options)?;
    Ok(ReleaseRequest {
        key,
        count: o.count.unwrap_or(1),
    })
}

pub fn parse_lease<A: AsRef<[u8]>>(args: &[A]) -> LockResult<LeaseRequest<'_, A>> {
    let [key, options @ ..] = args else {
        return Err(LockError::Arity(Command::SemLease));
    };
    let o = parse_options(Command::SemLease, options)?;
    let count = o.count.unwrap_or(1);
    if count > MAX_LEASE_COUNT {
        return Err(LockError::Invalid(
            "invalid COUNT: SEMAPHORE.LEASE takes at most 100000 permits at once",
        ));
    }
    Ok(LeaseRequest {
        key,
        count,
        lease: o.lease,
        keepalive: o.keepalive,
        block: o.block,
        replicas: o.replicas,
    })
}

pub fn parse_return<A: AsRef<[u8]>>(args: &[A]) -> LockResult<ReturnRequest<'_, A>> {
    let [key, ids @ ..] = args else {
        return Err(LockError::Arity(Command::SemReturn));
    };
    if ids.is_empty() {
        return Err(LockError::Arity(Command::SemReturn));
    }
    Ok(ReturnRequest {
        key,
        ids: PermitIds::parse(ids)?,
    })
}

pub fn parse_renew<A: AsRef<[u8]>>(args: &[A]) -> LockResult<RenewRequest<'_, A>> {
    let [key, id, options @ ..] = args else {
        return Err(LockError::Arity(Command::SemRenew));
    };
    let id = parse_id(id.as_ref())?;
    let o = parse_options(Command::SemRenew, options)?;
    Ok(RenewRequest {
        key,
        id,
        lease: o.lease,
        keepalive: o.keepalive,
        replicas: o.replicas,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::parse_key;
    use proptest::prelude::*;

    fn args(s: &str) -> Vec<Vec<u8>> {
        s.split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| w.as_bytes().to_vec())
            .collect()
    }

    const ID: &str = "00112233445566778899aabbccddeeff";

    #[test]
    fn create_and_add() {
        let a = args("s 5");
        let r = parse_create(&a).unwrap();
        assert_eq!((r.permits, r.lease), (5, None));
        let a = args("s 0 px 100");
        let r = parse_create(&a).unwrap();
        assert_eq!(
            (r.permits, r.lease),
            (0, Some(Lease::from_millis(100).unwrap()))
        );
        let invalid_permits = LockError::Invalid("invalid permits: must be a non-negative integer");
        for (input, want) in [
            ("s", LockError::Arity(Command::SemCreate)),
            ("s -1", invalid_permits.clone()),
            ("s x", invalid_permits.clone()),
            ("s 01", invalid_permits),
            (
                "s 1 BLOCK 5",
                LockError::Syntax("unknown option, expected PX ms or EX s"),
            ),
            (
                "s 1 px 0",
                LockError::BadLease("PX and EX take a positive integer"),
            ),
        ] {
            assert_eq!(parse_create(&args(input)).err(), Some(want), "{input}");
        }
        assert_eq!(parse_add(&args("s -7")).unwrap().delta, -7);
        assert_eq!(parse_add(&args("s 0")).unwrap().delta, 0);
        for (input, want) in [
            ("s", LockError::Arity(Command::SemAdd)),
            ("s 1 2", LockError::Arity(Command::SemAdd)),
            (
                "s 1.5",
                LockError::Invalid("invalid delta: must be an integer"),
            ),
        ] {
            assert_eq!(parse_add(&args(input)).err(), Some(want), "{input}");
        }
    }

    #[test]
    fn acquire_and_release() {
        let a = args("s");
        let r = parse_acquire(&a).unwrap();
        assert_eq!((r.count, r.block, r.replicas), (1, None, None));
        let a = args("s block 0 Count 3 REPLICAS 1 50");
        let r = parse_acquire(&a).unwrap();
        assert_eq!(r.count, 3);
        assert_eq!(r.block, Some(Block { timeout_ms: None }));
        assert_eq!(
            r.replicas,
            Some(Replicas {
                count: 1,
                timeout_ms: 50
            })
        );
        let bad_count = LockError::Invalid("invalid COUNT: must be a positive integer");
        for (input, want) in [
            ("", LockError::Arity(Command::SemAcquire)),
            ("s COUNT 0", bad_count.clone()),
            ("s COUNT -2", bad_count.clone()),
            ("s COUNT x", bad_count.clone()),
            ("s COUNT", LockError::Syntax("option without a value")),
            (
                "s COUNT 1 count 2",
                LockError::Syntax("COUNT given more than once"),
            ),
            (
                "s KEEPALIVE",
                LockError::NotHere(
                    "KEEPALIVE is for leased permits: anonymous permits have nothing to tie (use SEMAPHORE.LEASE)",
                ),
            ),
            (
                "s PX 10",
                LockError::Syntax("unknown option, expected COUNT n, BLOCK ms or REPLICAS n ms"),
            ),
            (
                "s TOKEN",
                LockError::Syntax("unknown option, expected COUNT n, BLOCK ms or REPLICAS n ms"),
            ),
        ] {
            assert_eq!(parse_acquire(&args(input)).err(), Some(want), "{input}");
        }
        assert_eq!(parse_release(&args("s")).unwrap().count, 1);
        assert_eq!(parse_release(&args("s COUNT 4")).unwrap().count, 4);
        assert_eq!(parse_release(&args("s COUNT 0")).err(), Some(bad_count));
        assert_eq!(
            parse_release(&args("s BLOCK 1")).err(),
            Some(LockError::Syntax("unknown option, expected COUNT n"))
        );
        // LOCK.ACQUIRE takes no COUNT.
        assert!(crate::request::parse_acquire(&args("k o COUNT 1")).is_err());
    }

    #[test]
    fn lease_forms() {
        let default = Lease::from_millis(30_000).unwrap();
        let a = args("s");
        let r = parse_lease(&a).unwrap();
        assert_eq!(
            r.claim(default),
            LeaseClaim {
                count: 1,
                lease: None
            }
        );
        let a = args("s keepalive count 2");
        let r = parse_lease(&a).unwrap();
        assert_eq!(
            r.claim(default),
            LeaseClaim {
                count: 2,
                lease: Some(default)
            }
        );
        let a = args("s KEEPALIVE EX 2 BLOCK 10 REPLICAS 0 1");
        let r = parse_lease(&a).unwrap();
        assert_eq!(r.claim(default).lease.unwrap().millis(), 2000);
        assert!(r.keepalive && r.block.is_some() && r.replicas.is_some());
        assert_eq!(
            parse_lease(&args("s COUNT 100001")).err(),
            Some(LockError::Invalid(
                "invalid COUNT: SEMAPHORE.LEASE takes at most 100000 permits at once"
            ))
        );
        assert_eq!(parse_lease(&args("s COUNT 100000")).unwrap().count, 100_000);
        assert!(parse_lease(&args("s TOKEN")).is_err());
    }

    #[test]
    fn return_and_renew() {
        let upper = ID.to_uppercase();
        let a = args(&format!("s {ID} ffffffffffffffffffffffffffffffff"));
        let r = parse_return(&a).unwrap();
        assert_eq!(r.ids.len(), 2);
        assert_eq!(r.ids[0][0], 0x00);
        assert_eq!(r.ids[0][15], 0xff);
        for (input, want) in [
            ("s".to_string(), LockError::Arity(Command::SemReturn)),
            (
                format!("s {ID} {upper}"),
                LockError::BadPermitId("the same id given twice"),
            ),
            (
                format!("s {ID} abc"),
                LockError::BadPermitId("32 hex characters expected"),
            ),
            (
                format!("s {}g", &ID[..31]),
                LockError::BadPermitId("32 hex characters expected"),
            ),
            (
                format!("s {ID}0"),
                LockError::BadPermitId("32 hex characters expected"),
            ),
        ] {
            assert_eq!(parse_return(&args(&input)).err(), Some(want), "{input}");
        }
        let a = args(&format!("s {upper} px 5 KEEPALIVE"));
        let r = parse_renew(&a).unwrap();
        assert_eq!(r.id, parse_id(ID.as_bytes()).unwrap());
        assert_eq!(r.lease_or(Lease::WATCHDOG_DEFAULT).millis(), 5);
        assert!(r.keepalive);
        let a = args(&format!("s {ID}"));
        let r = parse_renew(&a).unwrap();
        assert_eq!(r.lease_or(Lease::WATCHDOG_DEFAULT), Lease::WATCHDOG_DEFAULT);
        assert!(!r.keepalive);
        assert_eq!(
            parse_renew(&args("s")).err(),
            Some(LockError::Arity(Command::SemRenew))
        );
        assert_eq!(
            parse_renew(&args(&format!("s {ID} COUNT 1"))).err(),
            Some(LockError::Syntax(
                "unknown option, expected PX ms, EX s, KEEPALIVE or REPLICAS n ms"
            ))
        );
        assert!(parse_key(Command::SemInfo, &args("s")).is_ok());
        assert_eq!(
            parse_key(Command::SemDrain, &args("s x")).err(),
            Some(LockError::Arity(Command::SemDrain))
        );
    }

    fn word() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"COUNT".to_vec()),
            Just(b"px".to_vec()),
            Just(b"EX".to_vec()),
            Just(b"block".to_vec()),
            Just(b"KEEPALIVE".to_vec()),
            Just(b"replicas".to_vec()),
            Just(ID.as_bytes().to_vec()),
            "[0-9a-fA-F]{32}".prop_map(|s| s.into_bytes()),
            "-?[0-9]{1,21}".prop_map(|s| s.into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..40),
        ]
    }

    proptest! {
        // Whatever arrives, parsing answers with a request or an error, and
        // an accepted request is consistent with its input.
        #[test]
        fn parsing_never_panics(input in proptest::collection::vec(word(), 0..8)) {
            if let Ok(r) = parse_acquire(&input) {
                prop_assert!(r.count >= 1);
            }
            if let Ok(r) = parse_release(&input) {
                prop_assert!(r.count >= 1);
            }
            if let Ok(r) = parse_lease(&input) {
                prop_assert!((1..=MAX_LEASE_COUNT).contains(&r.count));
                let words = 1 + 2 * usize::from(input[1..].iter().any(|w| w.eq_ignore_ascii_case(b"COUNT")))
                    + 2 * usize::from(r.lease.is_some())
                    + usize::from(r.keepalive)
                    + 2 * usize::from(r.block.is_some())
                    + 3 * usize::from(r.replicas.is_some());
                prop_assert_eq!(input.len(), words);
            }
            if let Ok(r) = parse_return(&input) {
                prop_assert_eq!(r.ids.len(), input.len() - 1);
            }
            if let Ok(r) = parse_create(&input) {
                prop_assert!(r.permits >= 0);
            }
            let _ = parse_add(&input);
            let _ = parse_renew(&input);
        }

        // Hex ids round-trip, in either case.
        #[test]
        fn ids_round_trip(id in any::<[u8; 16]>(), upper: bool) {
            let hex = super::super::to_hex(&id);
            let text = if upper { hex.to_ascii_uppercase() } else { hex.to_vec() };
            prop_assert_eq!(parse_id(&text), Ok(id));
            prop_assert!(hex.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)));
        }
    }
}
