//! Layer 1: what the module needs to know about the server it runs in:
//! its role (kept from role-change events, so the hot path reads a flag),
//! cluster mode, which server it is, whether writes are paused, whether this
//! node still serves a key, and the replication offsets (REPLICAS).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use crate::core::slot::key_slot;
use crate::glue::runtime::ffi::{Ctx, RStr, raw};
use crate::glue::runtime::hooks::ServerInfo as Info;
use crate::glue::runtime::key::{KeyKind, RawKey};

static PRIMARY: AtomicBool = AtomicBool::new(true);
/// Replicas online, counted at load and then followed through replica
/// events (REPLICAS checks it on every call: INFO would cost microseconds).
static ONLINE_REPLICAS: AtomicI64 = AtomicI64::new(0);
static CLUSTER: AtomicBool = AtomicBool::new(false);
static VALKEY: AtomicBool = AtomicBool::new(false);

/// Reads what cannot change while the server runs, and the current role.
pub fn init(ctx: Ctx) {
    let flags = ctx.flags();
    CLUSTER.store(
        flags & raw::REDISMODULE_CTX_FLAGS_CLUSTER != 0,
        Ordering::Relaxed,
    );
    PRIMARY.store(
        flags & raw::REDISMODULE_CTX_FLAGS_MASTER != 0,
        Ordering::Relaxed,
    );
    VALKEY.store(
        Info::section(ctx, c"server").is_some_and(|i| i.text(c"valkey_version").is_some()),
        Ordering::Relaxed,
    );
    let online = replication(ctx).map_or(0, |r| r.acked.len() as i64);
    ONLINE_REPLICAS.store(online, Ordering::Relaxed);
}

/// A replica came online (finished its sync) or went offline.
pub fn replica_changed(online: bool) {
    let n = ONLINE_REPLICAS.load(Ordering::Relaxed) + if online { 1 } else { -1 };
    ONLINE_REPLICAS.store(n.max(0), Ordering::Relaxed);
}

/// A primary: LOCK.* writes allowed, lock logic runs. False on replicas.
pub fn is_primary() -> bool {
    PRIMARY.load(Ordering::Relaxed)
}

pub fn set_primary(primary: bool) {
    PRIMARY.store(primary, Ordering::Relaxed);
}

/// `cluster-enabled yes` (cannot change while the server runs).
pub fn cluster() -> bool {
    CLUSTER.load(Ordering::Relaxed)
}

/// Valkey rather than Redis (Valkey reports a Redis-compatible version).
pub fn valkey() -> bool {
    VALKEY.load(Ordering::Relaxed)
}

/// Clients are paused for writes (CLIENT PAUSE WRITE, failover): no writes
/// or propagation from timers or events now, or the server dies.
pub fn writes_paused(ctx: Ctx) -> bool {
    ctx.writes_paused()
}

/// Whether this node may write `key` for a deferred job now. Outside a
/// cluster, always. In a cluster the key's slot may be migrating or gone: a
/// key deleted by MIGRATE was moved, not released, and nothing may be
/// written for it where it is no longer served. So: a slot this node owns
/// is served (while it migrates away, only for keys still here: the server
/// itself creates no new key in a migrating slot, it sends the client to
/// the target); a slot this node is importing is served too (its locks
/// arrived with MIGRATE, its waiters came with ASKING); any other slot is
/// not served now. "Not now" is never "never": the caller retries while it
/// has something to do (a migration can be aborted, a slot can come back).
pub fn serves_key(ctx: Ctx, key: &RStr) -> bool {
    if !cluster() {
        return true;
    }
    match slot_state(ctx, key_slot(key.as_ref())) {
        SlotState::Owned => true,
        SlotState::Importing => true,
        SlotState::Migrating => RawKey::open(ctx, key, false).kind() != KeyKind::Empty,
        SlotState::Elsewhere => false,
    }
}

/// This node's relation to a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    Owned,
    Migrating,
    Importing,
    Elsewhere,
}

thread_local! {
    /// This node's slots, read once per scheduler batch (the topology cannot
    /// change inside one callback): `None` until read.
    static SLOTS: RefCell<Option<MySlots>> = const { RefCell::new(None) };
}

/// The scheduler starts a batch: the slots are read again when next needed.
pub fn forget_slots() {
    SLOTS.with(|s| s.borrow_mut().take());
}

fn slot_state(ctx: Ctx, slot: u16) -> SlotState {
    let known = SLOTS.with(|s| s.borrow().as_ref().map(|m| m.state(slot)));
    if let Some(state) = known {
        return state;
    }
    let mine = ctx
        .call_words(c"CLUSTER", c"NODES")
        .map(|text| MySlots::parse(&String::from_utf8_lossy(&text)))
        .unwrap_or_default();
    let state = mine.state(slot);
    SLOTS.with(|s| *s.borrow_mut() = Some(mine));
    state
}

/// The `myself` line of CLUSTER NODES: owned ranges, and the slots being
/// migrated away or imported.
#[derive(Default, Debug, PartialEq)]
struct MySlots {
    owned: Vec<(u16, u16)>,
    migrating: Vec<u16>,
    importing: Vec<u16>,
}

impl MySlots {
    fn parse(nodes: &str) -> MySlots {
        let mut mine = MySlots::default();
        let Some(line) = nodes.lines().find(|l| {
            l.split(' ')
                .nth(2)
                .is_some_and(|flags| flags.split(',').any(|f| f == "myself"))
        }) else {
            return mine;
        };
        for part in line.split(' ').skip(8) {
            if let Some(inner) = part.strip_prefix('[').and_then(|p| p.strip_suffix(']')) {
                if let Some((slot, _)) = inner.split_once("->-") {
                    mine.migrating.extend(slot.parse::<u16>().ok());
                } else if let Some((slot, _)) = inner.split_once("-<-") {
                    mine.importing.extend(slot.parse::<u16>().ok());
                }
            } else if let Some((a, b)) = part.split_once('-') {
                if let (Ok(a), Ok(b)) = (a.parse(), b.parse()) {
                    mine.owned.push((a, b));
                }
            } else if let Ok(n) = part.parse() {
                mine.owned.push((n, n));
            }
        }
        mine
    }

    fn state(&self, slot: u16) -> SlotState {
        if self.importing.contains(&slot) {
            SlotState::Importing
        } else if !self.owned.iter().any(|&(a, b)| (a..=b).contains(&slot)) {
            SlotState::Elsewhere
        } else if self.migrating.contains(&slot) {
            SlotState::Migrating
        } else {
            SlotState::Owned
        }
    }
}

/// Where replication stands: the primary's offset and each online
/// replica's acknowledged offset.
pub struct Replication {
    pub offset: i64,
    pub acked: Vec<i64>,
}

/// `INFO replication`: `master_repl_offset`, and `slaveN:...,state=online,offset=X,...`.
pub fn replication(ctx: Ctx) -> Option<Replication> {
    let info = Info::section(ctx, c"replication")?;
    let offset = info.number(c"master_repl_offset")?;
    let connected = info.number(c"connected_slaves").unwrap_or(0);
    let mut acked = Vec::new();
    for i in 0..connected.max(0) {
        let Ok(field) = std::ffi::CString::new(format!("slave{i}")) else {
            continue;
        };
        let Some(line) = info.text(&field) else {
            continue;
        };
        if let Some(offset) = replica_offset(&line) {
            acked.push(offset);
        }
    }
    Some(Replication { offset, acked })
}

/// The acknowledged offset of an online replica's INFO line.
fn replica_offset(line: &str) -> Option<i64> {
    let mut online = false;
    let mut offset = None;
    for part in line.split(',') {
        match part.split_once('=') {
            Some(("state", state)) => online = state == "online",
            Some(("offset", n)) => offset = n.parse().ok(),
            _ => {}
        }
    }
    offset.filter(|_| online)
}

/// Replicas online now.
pub fn online_replicas() -> i64 {
    ONLINE_REPLICAS.load(Ordering::Relaxed)
}

/// `INFO memory`'s `maxmemory_policy`, and whether `maxmemory` is set.
pub fn eviction_policy(ctx: Ctx) -> Option<(String, bool)> {
    let info = Info::section(ctx, c"memory")?;
    let policy = info.text(c"maxmemory_policy")?;
    let limited = info.number(c"maxmemory").is_some_and(|m| m > 0);
    Some((policy, limited))
}

#[cfg(test)]
mod tests {
    use super::{MySlots, SlotState, replica_offset};

    #[test]
    fn cluster_nodes_myself_line() {
        let nodes = "\
a1 127.0.0.1:7001@17001 master - 0 0 1 connected 0-100\n\
b2 127.0.0.1:7000@17000 myself,master - 0 0 2 connected 200 300-400 [300->-a1] [5-<-a1]\n";
        let mine = MySlots::parse(nodes);
        assert_eq!(mine.owned, vec![(200, 200), (300, 400)]);
        assert_eq!(mine.state(200), SlotState::Owned);
        assert_eq!(mine.state(300), SlotState::Migrating);
        assert_eq!(mine.state(5), SlotState::Importing);
        assert_eq!(mine.state(50), SlotState::Elsewhere);
        assert_eq!(MySlots::parse("").state(1), SlotState::Elsewhere);
    }

    #[test]
    fn replica_lines() {
        assert_eq!(
            replica_offset("ip=127.0.0.1,port=7001,state=online,offset=4242,lag=0"),
            Some(4242)
        );
        assert_eq!(
            replica_offset("ip=127.0.0.1,port=7001,state=wait_bgsave,offset=0,lag=0"),
            None
        );
        assert_eq!(replica_offset("garbage"), None);
    }
}
