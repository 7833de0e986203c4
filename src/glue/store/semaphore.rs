//! `SemKey`: the semaphore rules' `SemaphoreStore` over real keys, through
//! the low-level key API: the permit count (a string at the key) and the
//! lease set `{key}:timeout` (a sorted set: member = a permit id's 16 raw
//! bytes, score = its absolute deadline in server ms, or `NO_LEASE`), both
//! exactly as RPermitExpirableSemaphore stores them.
//!
//! Every write is applied, replicated as its effect with absolute times
//! (`INCRBY`, `SET ... PXAT` / `SET ... KEEPTTL`, `ZADD` / `ZREM` with the
//! absolute scores, `PEXPIREAT`, `PERSIST`; never SEMAPHORE.* verbatim) and
//! announced as the keyspace event the equivalent command fires, marked as
//! the module's own. A read-only call (`Mode::Read`: SEMAPHORE.INFO) reads
//! the count with GET, so that not even the value's encoding changes.
//!
//! In a cluster, a lease set that hashes to another slot than the key is
//! never opened: the store reports it missing, and the rules answer
//! CROSSSLOT where it would be written.

use std::ffi::CStr;

use crate::core::channel::timeout_key;
use crate::core::lease::Millis;
use crate::core::number::parse_i64;
use crate::core::semaphore::{PermitId, SemaphoreStore, SetShape};
use crate::core::slot::timeout_key_same_slot;
use crate::core::string::StringValue;
use crate::glue::runtime::ffi::{Arg, Ctx, OwnedStr, RStr, raw};
use crate::glue::runtime::key::{KeyKind, RawKey};
use crate::glue::store::{Mode, OwnEvent, server};

pub struct SemKey<'a> {
    ctx: Ctx,
    name: &'a RStr,
    mode: Mode,
    key: RawKey,
    /// The lease set, `None` when it is out of this node's reach (another
    /// cluster slot).
    leases: Option<LeaseSet>,
    now: Millis,
    wrote: bool,
    /// The count as last read (reads repeat within one call; GET is not
    /// free): cleared by every write of the count.
    count: Option<StringValue<Vec<u8>>>,
}

struct LeaseSet {
    name: OwnedStr,
    key: RawKey,
    wrote: bool,
}

impl<'a> SemKey<'a> {
    /// Opens the key and its lease set (for writing, logically expired keys
    /// are deleted here, as any write command would).
    pub fn open(ctx: Ctx, name: &'a RStr, mode: Mode) -> SemKey<'a> {
        let write = mode == Mode::Write;
        let key = RawKey::open(ctx, name, write);
        let leases = leases_reachable(name.as_ref()).then(|| {
            let tname = OwnedStr::new(&timeout_key(name.as_ref()));
            let key = RawKey::open(ctx, &tname, write);
            LeaseSet {
                name: tname,
                key,
                wrote: false,
            }
        });
        SemKey {
            ctx,
            name,
            mode,
            key,
            leases,
            now: ctx.now(),
            wrote: false,
            count: None,
        }
    }

    /// The lease set's name and whether it exists, `None` when it is out
    /// of this node's reach.
    pub fn lease_set(&self) -> Option<(&RStr, bool)> {
        self.leases
            .as_ref()
            .map(|set| (&*set.name, set.key.kind() != KeyKind::Empty))
    }

    pub fn name(&self) -> &'a RStr {
        self.name
    }

    fn notify(&self, class: i32, event: &CStr, key: &RStr) {
        let _own = OwnEvent::mark();
        self.ctx.notify(class, event, key);
    }

    fn set_mut(&mut self) -> &mut LeaseSet {
        match self.leases.as_mut() {
            Some(set) => set,
            // The rules never write a set out of reach (`leases_in_slot`).
            None => panic!("a semaphore's lease set in another slot was written"),
        }
    }

    /// The count's bytes: GET for a read-only call (no encoding change),
    /// in place for a writing one (it may write the count next).
    fn read_count(&self) -> Option<Vec<u8>> {
        if self.mode == Mode::Read
            && let Ok(value) = self.ctx.call_for_bytes(c"GET", &[self.name])
        {
            return value;
        }
        // A writing call, or GET refused (a cluster replica or an importing
        // slot, where the module's own client is redirected).
        self.key.with_string(<[u8]>::to_vec)
    }
}

/// Whether the lease set of `key` may be used here: always outside a
/// cluster; in a cluster only when it shares the key's slot.
fn leases_reachable(key: &[u8]) -> bool {
    !server::cluster() || timeout_key_same_slot(key)
}

/// A score as ZADD would take it back exactly (shortest round-trip text).
fn score_text(score: f64) -> Vec<u8> {
    if score.fract() == 0.0 && score.abs() < 1e17 {
        format!("{}", score as i64).into_bytes()
    } else {
        format!("{score}").into_bytes()
    }
}

impl Drop for SemKey<'_> {
    fn drop(&mut self) {
        if let Some(set) = &self.leases
            && set.wrote
        {
            self.ctx.signal_modified(&set.name);
        }
        if self.wrote {
            self.ctx.signal_modified(self.name);
        }
    }
}

impl SemaphoreStore for SemKey<'_> {
    type Value = Vec<u8>;
    type Member = Vec<u8>;

    fn now(&self) -> Millis {
        self.now
    }

    fn permits(&mut self) -> StringValue<Vec<u8>> {
        if let Some(count) = &self.count {
            return count.clone();
        }
        let count = match self.key.kind() {
            KeyKind::Empty => StringValue::Missing,
            KeyKind::String => match self.read_count() {
                Some(bytes) => StringValue::Str(bytes),
                None => StringValue::Missing,
            },
            _ => StringValue::Other,
        };
        self.count = Some(count.clone());
        count
    }

    fn deadline(&mut self) -> Option<Millis> {
        self.key.deadline()
    }

    fn create(&mut self, permits: i64, deadline: Option<Millis>) {
        self.wrote = true;
        self.count = None;
        let digits = permits.to_string();
        self.key.write_string(digits.as_bytes());
        match deadline {
            Some(at) => {
                self.key.set_deadline(at);
                self.ctx.replicate(
                    c"SET",
                    &[
                        Arg::Str(self.name),
                        Arg::Bytes(digits.as_bytes()),
                        Arg::Word(c"PXAT"),
                        Arg::Int(at),
                    ],
                );
                self.notify(raw::REDISMODULE_NOTIFY_STRING, c"set", self.name);
                self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire", self.name);
            }
            None => {
                self.ctx.replicate(
                    c"SET",
                    &[Arg::Str(self.name), Arg::Bytes(digits.as_bytes())],
                );
                self.notify(raw::REDISMODULE_NOTIFY_STRING, c"set", self.name);
            }
        }
    }

    fn incr(&mut self, delta: i64) {
        // The count as this call read it, if it did (a second look in place
        // is not free).
        let current = match self.count.take() {
            Some(StringValue::Str(bytes)) => parse_i64(&bytes).unwrap_or(0),
            Some(_) => 0,
            None => match self.key.kind() {
                KeyKind::String => self.key.with_string(parse_i64).flatten().unwrap_or(0),
                _ => 0,
            },
        };
        // The rules never let it overflow; saturate rather than panic.
        let after = current.saturating_add(delta);
        self.wrote = true;
        self.count = None;
        // In place: the key keeps its TTL, as INCRBY does (a missing key is
        // created without one).
        self.key.write_string(after.to_string().as_bytes());
        self.ctx
            .replicate(c"INCRBY", &[Arg::Str(self.name), Arg::Int(delta)]);
        self.notify(raw::REDISMODULE_NOTIFY_STRING, c"incrby", self.name);
    }

    fn set_permits(&mut self, value: i64) {
        if self.key.kind() != KeyKind::String {
            return;
        }
        self.wrote = true;
        self.count = None;
        let digits = value.to_string();
        self.key.write_string(digits.as_bytes());
        self.ctx.replicate(
            c"SET",
            &[
                Arg::Str(self.name),
                Arg::Bytes(digits.as_bytes()),
                Arg::Word(c"KEEPTTL"),
            ],
        );
        self.notify(raw::REDISMODULE_NOTIFY_STRING, c"set", self.name);
    }

    fn leases_in_slot(&self) -> bool {
        self.leases.is_some()
    }

    fn leases(&mut self) -> SetShape {
        let Some(set) = &self.leases else {
            return SetShape::Missing;
        };
        match set.key.kind() {
            KeyKind::Empty => SetShape::Missing,
            KeyKind::Zset => SetShape::Zset { len: set.key.len() },
            _ => SetShape::Other,
        }
    }

    fn score(&mut self, id: &[u8]) -> Option<f64> {
        let set = self.leases.as_ref()?;
        if set.key.kind() != KeyKind::Zset {
            return None;
        }
        set.key.zset_score(&OwnedStr::new(id))
    }

    fn lapsed(&mut self, now: Millis) -> Vec<Vec<u8>> {
        let mut lapsed = Vec::new();
        if let Some(set) = &self.leases
            && set.key.kind() == KeyKind::Zset
        {
            set.key
                .zset_range(f64::NEG_INFINITY, now as f64, |member, _| {
                    lapsed.push(member.to_vec());
                    true
                });
        }
        lapsed
    }

    fn live(&mut self, now: Millis) -> usize {
        let Some(set) = &self.leases else { return 0 };
        if set.key.kind() != KeyKind::Zset {
            return 0;
        }
        let mut lapsed = 0usize;
        set.key.zset_range(f64::NEG_INFINITY, now as f64, |_, _| {
            lapsed += 1;
            true
        });
        set.key.len().saturating_sub(lapsed)
    }

    fn first_score(&mut self) -> Option<f64> {
        let set = self.leases.as_ref()?;
        if set.key.kind() != KeyKind::Zset {
            return None;
        }
        let mut first = None;
        set.key
            .zset_range(f64::NEG_INFINITY, f64::INFINITY, |_, score| {
                first = Some(score);
                false
            });
        first
    }

    fn add_leases(&mut self, ids: &[PermitId], score: f64) {
        if ids.is_empty() {
            return;
        }
        let ctx = self.ctx;
        let set = self.set_mut();
        set.wrote = true;
        let score_bytes = score_text(score);
        let mut args: Vec<Arg<'_>> = Vec::with_capacity(1 + 2 * ids.len());
        args.push(Arg::Str(&set.name));
        for id in ids {
            set.key.zset_add(score, &OwnedStr::new(id));
            args.push(Arg::Bytes(&score_bytes));
            args.push(Arg::Bytes(id));
        }
        ctx.replicate(c"ZADD", &args);
        let _own = OwnEvent::mark();
        ctx.notify(raw::REDISMODULE_NOTIFY_ZSET, c"zadd", &set.name);
    }

    fn remove_leases<M: AsRef<[u8]>>(&mut self, members: &[M]) {
        if members.is_empty() {
            return;
        }
        let ctx = self.ctx;
        let set = self.set_mut();
        let mut args: Vec<Arg<'_>> = Vec::with_capacity(1 + members.len());
        args.push(Arg::Str(&set.name));
        let mut removed = false;
        for m in members {
            removed |= set.key.zset_rem(&OwnedStr::new(m.as_ref()));
            args.push(Arg::Bytes(m.as_ref()));
        }
        if !removed {
            return;
        }
        set.wrote = true;
        ctx.replicate(c"ZREM", &args);
        let _own = OwnEvent::mark();
        ctx.notify(raw::REDISMODULE_NOTIFY_ZSET, c"zrem", &set.name);
        // ZREM deletes the set with its last member (the replica's ZREM
        // does the same).
        match set.key.kind() {
            KeyKind::Zset if set.key.len() == 0 => {
                set.key.delete();
                ctx.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del", &set.name);
            }
            KeyKind::Empty => {
                ctx.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del", &set.name);
            }
            _ => {}
        }
    }

    fn leases_deadline(&mut self) -> Option<Millis> {
        self.leases.as_ref()?.key.deadline()
    }

    fn set_leases_deadline(&mut self, deadline: Millis) {
        let ctx = self.ctx;
        let set = self.set_mut();
        if set.key.kind() == KeyKind::Empty {
            return;
        }
        set.wrote = true;
        set.key.set_deadline(deadline);
        ctx.replicate(c"PEXPIREAT", &[Arg::Str(&set.name), Arg::Int(deadline)]);
        let _own = OwnEvent::mark();
        ctx.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire", &set.name);
    }

    fn persist_leases(&mut self) {
        let ctx = self.ctx;
        let set = self.set_mut();
        if set.key.kind() == KeyKind::Empty {
            return;
        }
        set.wrote = true;
        set.key.persist();
        ctx.replicate(c"PERSIST", &[Arg::Str(&set.name)]);
        let _own = OwnEvent::mark();
        ctx.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"persist", &set.name);
    }
}

#[cfg(test)]
mod tests {
    use super::score_text;

    #[test]
    fn scores_round_trip() {
        assert_eq!(score_text(922_337_203_685_477.0), b"922337203685477");
        assert_eq!(score_text(1_700_000_000_123.0), b"1700000000123");
        assert_eq!(score_text(-3.0), b"-3");
        assert_eq!(score_text(1.5), b"1.5");
        let odd = 0.1 + 0.2;
        assert_eq!(
            // ok: a test; score_text writes ASCII digits.
            String::from_utf8(score_text(odd))
                .unwrap()
                .parse::<f64>()
                .unwrap(),
            odd
        );
    }
}
