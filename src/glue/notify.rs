//! The unlock notification: message `0` on Redisson's channel, so Redisson
//! waiters (and anyone else listening) learn that the lock is free.
//!
//! Standalone: PUBLISH semantics. `RedisModule_PublishMessage` reaches this
//! server's subscribers only, so a PUBLISH is also sent down the replication
//! stream (flag `A`: replicas, not the AOF), as the PUBLISH command does —
//! when replicas are connected. `RedisModule_Replicate` costs ~3,000
//! instructions even when nothing is propagated (measured), and a message
//! nobody can receive need not be sent; pub/sub is fire-and-forget, so this
//! never affects lock state.
//! Cluster: sharded publish, since the channel hashes to the key's slot.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use super::ffi::{Ctx, OwnedStr, RStr, StaticStr, raw};
use crate::core::channel::{UNLOCK_MESSAGE, unlock_channel};

pub static MESSAGE: StaticStr = StaticStr::empty();

/// Replicas online: counted at load, then followed through replica events.
/// It can only overcount (a replica mid-sync at load is counted twice once
/// online), which costs a useless PUBLISH, never a lost one.
static REPLICAS: AtomicI64 = AtomicI64::new(0);

/// `cluster-enabled` cannot change while the server runs: read once at load
/// (asking on every unlock would cost a full GetContextFlags).
static CLUSTER: AtomicBool = AtomicBool::new(false);

pub fn init(ctx: Ctx) {
    MESSAGE.init(UNLOCK_MESSAGE);
    REPLICAS.store(connected_replicas(ctx), Ordering::Relaxed);
    CLUSTER.store(
        ctx.has_flag(raw::REDISMODULE_CTX_FLAGS_CLUSTER),
        Ordering::Relaxed,
    );
}

pub fn replica_changed(online: bool) {
    let delta = if online { 1 } else { -1 };
    let n = REPLICAS.load(Ordering::Relaxed);
    REPLICAS.store((n + delta).max(0), Ordering::Relaxed);
}

fn connected_replicas(ctx: Ctx) -> i64 {
    unsafe {
        let info = rm!(RedisModule_GetServerInfo(ctx.0, c"replication".as_ptr()));
        if info.is_null() {
            // Unknown: assume there are some (a useless PUBLISH is harmless).
            return 1;
        }
        let mut err: c_int = 0;
        let n = rm!(RedisModule_ServerInfoGetFieldSigned(
            info,
            c"connected_slaves".as_ptr(),
            &mut err
        ));
        rm!(RedisModule_FreeServerInfo(ctx.0, info));
        if err != 0 { 1 } else { n }
    }
}

pub fn publish_unlock(ctx: Ctx, key: &RStr) {
    let channel = OwnedStr::new(&unlock_channel(key.as_ref()));
    let message = MESSAGE.get();
    let cluster = CLUSTER.load(Ordering::Relaxed);
    unsafe {
        match raw::RedisModule_PublishMessageShard {
            Some(shard_publish) if cluster => shard_publish(ctx.0, channel.ptr(), message),
            _ => rm!(RedisModule_PublishMessage(ctx.0, channel.ptr(), message)),
        };
        // In a cluster the message reaches the other nodes over the cluster bus.
        if cluster || REPLICAS.load(Ordering::Relaxed) == 0 {
            return;
        }
        rm!(RedisModule_Replicate(
            ctx.0,
            c"PUBLISH".as_ptr(),
            c"Ass".as_ptr(),
            channel.ptr(),
            message
        ));
    }
}
