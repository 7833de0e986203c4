//! Layer 1: what the module needs to know about the server it runs in:
//! its role (kept from role-change events, so the hot path reads a flag),
//! cluster mode, which server it is, whether writes are paused, whether this
//! node still serves a key, and the replication offsets (REPLICAS).

use std::ffi::{CStr, c_int};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use crate::glue::runtime::ffi::{Ctx, RStr, raw};

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
pub fn writes_paused() -> bool {
    unsafe { rm!(RedisModule_AvoidReplicaTraffic()) != 0 }
}

/// Whether this node may write `key` now. Outside a cluster, always. In a
/// cluster, a slot can leave (resharding, Valkey's atomic migration) while
/// a queue for one of its keys waits here: the key's deletion by MIGRATE is
/// not a release, and nothing may be granted here once the slot is gone or
/// the key has already moved. Redis's own routing check answers that: a
/// command on a key this node cannot serve fails with EPERM.
pub fn serves_key(ctx: Ctx, key: &RStr) -> bool {
    if !cluster() {
        return true;
    }
    let reply = unsafe {
        rm!(RedisModule_Call(
            ctx.0,
            c"EXISTS".as_ptr(),
            c"s".as_ptr(),
            key.ptr()
        ))
    };
    if reply.is_null() {
        return false;
    }
    unsafe { rm!(RedisModule_FreeCallReply(reply)) };
    true
}

/// An `INFO <section>` snapshot, freed on drop.
pub struct Info {
    ctx: Ctx,
    info: *mut raw::RedisModuleServerInfoData,
}

impl Info {
    pub fn section(ctx: Ctx, section: &CStr) -> Option<Info> {
        let info = unsafe { rm!(RedisModule_GetServerInfo(ctx.0, section.as_ptr())) };
        (!info.is_null()).then_some(Info { ctx, info })
    }

    pub fn text(&self, field: &CStr) -> Option<String> {
        let p = unsafe { rm!(RedisModule_ServerInfoGetFieldC(self.info, field.as_ptr())) };
        if p.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string owned by the snapshot.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    pub fn number(&self, field: &CStr) -> Option<i64> {
        let mut err: c_int = 0;
        let n = unsafe {
            rm!(RedisModule_ServerInfoGetFieldSigned(
                self.info,
                field.as_ptr(),
                &mut err
            ))
        };
        (err == 0).then_some(n)
    }
}

impl Drop for Info {
    fn drop(&mut self) {
        unsafe { rm!(RedisModule_FreeServerInfo(self.ctx.0, self.info)) };
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
    use super::replica_offset;

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
