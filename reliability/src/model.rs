//! A model of the locks a single writer drives (R2 crash, R3 failover): it
//! predicts every reply, bounds every deadline by the writer's own clock,
//! and finds which prefix of the writer's operations a server's state
//! reflects after a crash or a promotion.
//!
//! Leases here are long (tens of seconds) so that nothing expires during a
//! test and the model needs no clock: what a restarted or promoted server
//! holds must be exactly the state after some prefix of the operations, with
//! each deadline inside the bounds of the call that set it
//! (`[invoke + lease, return + lease]` in wall-clock ms: the server stamps
//! its deadline at some moment between the two). A deadline past those
//! bounds is an extended lease.

use std::collections::BTreeMap;

use testkit::{Client, Reply};

use testkit::rng::Rng;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub owner: String,
    pub holds: i64,
    /// Bounds of the absolute deadline (ms since the epoch).
    pub deadline_lo: i64,
    pub deadline_hi: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MOp {
    Acquire {
        key: String,
        owner: String,
        lease: i64,
    },
    Release {
        key: String,
        owner: String,
    },
    Renew {
        key: String,
        owner: String,
        lease: i64,
    },
}

impl MOp {
    pub fn key(&self) -> &str {
        match self {
            MOp::Acquire { key, .. } | MOp::Release { key, .. } | MOp::Renew { key, .. } => key,
        }
    }

    pub fn args(&self) -> Vec<String> {
        match self {
            MOp::Acquire { key, owner, lease } => vec![
                "LOCK.ACQUIRE".into(),
                key.clone(),
                owner.clone(),
                "PX".into(),
                lease.to_string(),
            ],
            MOp::Release { key, owner } => {
                vec!["LOCK.RELEASE".into(), key.clone(), owner.clone()]
            }
            MOp::Renew { key, owner, lease } => vec![
                "LOCK.RENEW".into(),
                key.clone(),
                owner.clone(),
                "PX".into(),
                lease.to_string(),
            ],
        }
    }
}

/// What the server should answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    Int(i64),
    Nil,
    NotOwner,
}

impl Expect {
    pub fn matches(&self, r: &Reply) -> bool {
        match (self, r) {
            (Expect::Int(n), Reply::Int(m)) => n == m,
            (Expect::Nil, r) => r.is_nil(),
            (Expect::NotOwner, Reply::Error(e)) => e.starts_with("NOTOWNER"),
            _ => false,
        }
    }
}

/// One operation of the writer, with its wall-clock times.
#[derive(Clone, Debug)]
pub struct Step {
    pub op: MOp,
    pub invoke_ms: i64,
    /// `None`: in flight when the server died (bounded by the crash time).
    pub ret_ms: Option<i64>,
}

#[derive(Clone, Debug, Default)]
pub struct Model {
    pub locks: BTreeMap<String, Option<Held>>,
}

impl Model {
    pub fn new(keys: &[String]) -> Model {
        Model {
            locks: keys.iter().map(|k| (k.clone(), None)).collect(),
        }
    }

    /// Applies `op` (invoked at `invoke_ms`, answered by `ret_ms` at the
    /// latest) and returns the reply the server should give.
    pub fn apply(&mut self, op: &MOp, invoke_ms: i64, ret_ms: i64) -> Expect {
        let slot = self.locks.entry(op.key().to_string()).or_default();
        match op {
            MOp::Acquire { owner, lease, .. } => match slot {
                Some(h) if &h.owner != owner => Expect::Nil,
                _ => {
                    let holds = slot.as_ref().map_or(0, |h| h.holds) + 1;
                    *slot = Some(Held {
                        owner: owner.clone(),
                        holds,
                        deadline_lo: invoke_ms + lease,
                        deadline_hi: ret_ms + lease,
                    });
                    Expect::Int(holds)
                }
            },
            MOp::Release { owner, .. } => match slot {
                Some(h) if &h.owner == owner => {
                    h.holds -= 1;
                    let left = h.holds;
                    if left == 0 {
                        *slot = None;
                    }
                    Expect::Int(left)
                }
                _ => Expect::NotOwner,
            },
            MOp::Renew { owner, lease, .. } => match slot {
                Some(h) if &h.owner == owner => {
                    h.deadline_lo = invoke_ms + lease;
                    h.deadline_hi = ret_ms + lease;
                    Expect::Int(1)
                }
                _ => Expect::Int(0),
            },
        }
    }

    /// A random next operation: mostly sensible (the holder re-enters,
    /// renews or releases; others try to take held locks and get nil).
    pub fn next_op(&self, rng: &mut Rng, owners: &[&str], lease: (i64, i64)) -> MOp {
        let keys: Vec<&String> = self.locks.keys().collect();
        let key = (*rng.pick(&keys)).clone();
        let lease_ms = rng.range(lease.0, lease.1);
        match &self.locks[&key] {
            None => MOp::Acquire {
                key,
                owner: rng.pick(owners).to_string(),
                lease: lease_ms,
            },
            Some(h) => match rng.below(10) {
                0..=2 => MOp::Acquire {
                    key,
                    owner: h.owner.clone(),
                    lease: lease_ms,
                },
                3..=5 => MOp::Release {
                    key,
                    owner: h.owner.clone(),
                },
                6 | 7 => MOp::Renew {
                    key,
                    owner: h.owner.clone(),
                    lease: lease_ms,
                },
                // A foreign owner: nil / NOTOWNER / 0, nothing changes.
                _ => {
                    let other = rng.pick(owners).to_string();
                    match rng.below(3) {
                        0 => MOp::Acquire {
                            key,
                            owner: other,
                            lease: lease_ms,
                        },
                        1 => MOp::Release { key, owner: other },
                        _ => MOp::Renew {
                            key,
                            owner: other,
                            lease: lease_ms,
                        },
                    }
                }
            },
        }
    }
}

/// A key as a server holds it: (owner, holds, PEXPIRETIME), or `None`.
pub type Actual = Option<(String, i64, i64)>;

/// Reads every key's lock state (HGETALL + PEXPIRETIME, one round trip per
/// key pair). A key that is not a one-field lock hash is reported as an
/// impossible owner so that it never matches.
pub fn snapshot(c: &mut Client, keys: &[String]) -> BTreeMap<String, Actual> {
    for k in keys {
        c.send(&["HGETALL", k]);
        c.send(&["PEXPIRETIME", k]);
    }
    let mut out = BTreeMap::new();
    for k in keys {
        let all = c.read_reply();
        let deadline = c.read_reply();
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = match &all {
            Reply::Array(flat) => flat
                .chunks_exact(2)
                .map(|kv| (kv[0].as_bytes().to_vec(), kv[1].as_bytes().to_vec()))
                .collect(),
            Reply::Map(m) => m
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
            other => vec![(format!("<{other:?}>").into_bytes(), b"0".to_vec())],
        };
        let state = match &pairs[..] {
            [] => None,
            [(owner, holds)] => Some((
                String::from_utf8_lossy(owner).into_owned(),
                String::from_utf8_lossy(holds).parse().unwrap_or(-1),
                match deadline {
                    Reply::Int(d) => d,
                    _ => -3,
                },
            )),
            many => Some((format!("<{} fields>", many.len()), -1, -3)),
        };
        out.insert(k.clone(), state);
    }
    out
}

pub fn matches(expected: &Option<Held>, actual: &Actual) -> bool {
    match (expected, actual) {
        (None, None) => true,
        (Some(h), Some((owner, holds, deadline))) => {
            &h.owner == owner
                && h.holds == *holds
                && (h.deadline_lo..=h.deadline_hi).contains(deadline)
        }
        _ => false,
    }
}

pub fn show(expected: &Option<Held>) -> String {
    match expected {
        None => "free".into(),
        Some(h) => format!(
            "{} x{} deadline {}..={}",
            h.owner, h.holds, h.deadline_lo, h.deadline_hi
        ),
    }
}

pub fn show_actual(actual: &Actual) -> String {
    match actual {
        None => "free".into(),
        Some((o, h, d)) => format!("{o} x{h} deadline {d}"),
    }
}

/// The prefixes of `steps` (0..=len) whose resulting model state equals
/// `actual` on every key. In-flight steps are bounded by `crash_ms`.
pub fn matching_prefixes(
    keys: &[String],
    steps: &[Step],
    actual: &BTreeMap<String, Actual>,
    crash_ms: i64,
) -> Vec<usize> {
    let mut m = Model::new(keys);
    let mut mismatched: usize = keys
        .iter()
        .filter(|k| !matches(&m.locks[*k], &actual[*k]))
        .count();
    let mut found = Vec::new();
    if mismatched == 0 {
        found.push(0);
    }
    for (i, s) in steps.iter().enumerate() {
        let key = s.op.key().to_string();
        let before = matches(&m.locks[&key], &actual[&key]);
        m.apply(&s.op, s.invoke_ms, s.ret_ms.unwrap_or(crash_ms));
        let after = matches(&m.locks[&key], &actual[&key]);
        match (before, after) {
            (true, false) => mismatched += 1,
            (false, true) => mismatched -= 1,
            _ => {}
        }
        if mismatched == 0 {
            found.push(i + 1);
        }
    }
    found
}

/// For a report: the keys where the state after `prefix` steps differs
/// from `actual`.
pub fn differences(
    keys: &[String],
    steps: &[Step],
    prefix: usize,
    actual: &BTreeMap<String, Actual>,
    crash_ms: i64,
) -> Vec<String> {
    let mut m = Model::new(keys);
    for s in &steps[..prefix] {
        m.apply(&s.op, s.invoke_ms, s.ret_ms.unwrap_or(crash_ms));
    }
    keys.iter()
        .filter(|k| !matches(&m.locks[*k], &actual[*k]))
        .map(|k| {
            format!(
                "{k}: expected {}, found {}",
                show(&m.locks[k]),
                show_actual(&actual[k])
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    #[test]
    fn predicts_replies() {
        let mut m = Model::new(&keys());
        let acq = |o: &str| MOp::Acquire {
            key: "a".into(),
            owner: o.into(),
            lease: 1000,
        };
        assert_eq!(m.apply(&acq("x"), 10, 12), Expect::Int(1));
        assert_eq!(m.apply(&acq("x"), 20, 21), Expect::Int(2));
        assert_eq!(m.apply(&acq("y"), 20, 21), Expect::Nil);
        let rel = |o: &str| MOp::Release {
            key: "a".into(),
            owner: o.into(),
        };
        assert_eq!(m.apply(&rel("y"), 30, 31), Expect::NotOwner);
        assert_eq!(m.apply(&rel("x"), 30, 31), Expect::Int(1));
        // A release keeps the deadline of the last acquire.
        assert_eq!(m.locks["a"].as_ref().unwrap().deadline_lo, 1020);
        assert_eq!(m.apply(&rel("x"), 40, 41), Expect::Int(0));
        assert_eq!(m.locks["a"], None);
    }

    #[test]
    fn finds_the_durable_prefix() {
        let k = keys();
        let steps = vec![
            Step {
                op: MOp::Acquire {
                    key: "a".into(),
                    owner: "x".into(),
                    lease: 1000,
                },
                invoke_ms: 10,
                ret_ms: Some(11),
            },
            Step {
                op: MOp::Acquire {
                    key: "b".into(),
                    owner: "y".into(),
                    lease: 1000,
                },
                invoke_ms: 20,
                ret_ms: None,
            },
        ];
        let mut actual: BTreeMap<String, Actual> = [("a".into(), None), ("b".into(), None)].into();
        assert_eq!(matching_prefixes(&k, &steps, &actual, 30), vec![0]);
        actual.insert("a".into(), Some(("x".into(), 1, 1010)));
        assert_eq!(matching_prefixes(&k, &steps, &actual, 30), vec![1]);
        actual.insert("b".into(), Some(("y".into(), 1, 1030)));
        assert_eq!(matching_prefixes(&k, &steps, &actual, 30), vec![2]);
        // An extended lease matches no prefix.
        actual.insert("b".into(), Some(("y".into(), 1, 1031)));
        assert!(matching_prefixes(&k, &steps, &actual, 30).is_empty());
        assert_eq!(differences(&k, &steps, 2, &actual, 30).len(), 1);
    }
}
