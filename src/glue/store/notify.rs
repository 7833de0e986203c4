//! The unlock notification: message `0` on Redisson's channel, so Redisson
//! waiters (and anyone else listening) learn that the lock is free.
//!
//! Standalone: PUBLISH semantics. `RedisModule_PublishMessage` reaches this
//! server's subscribers only, so a PUBLISH is also sent down the replication
//! stream (flag `A`: replicas, not the AOF), as the PUBLISH command does —
//! when replicas are online (`server::online_replicas`). `RedisModule_Replicate` costs ~3,000
//! instructions even when nothing is propagated (measured), and a message
//! nobody can receive need not be sent; pub/sub is fire-and-forget, so this
//! never affects lock state.
//! Cluster: sharded publish, since the channel hashes to the key's slot.

use super::server;
use crate::core::channel::{UNLOCK_MESSAGE, unlock_channel};
use crate::glue::runtime::ffi::{Ctx, OwnedStr, RStr, StaticStr, raw};

pub static MESSAGE: StaticStr = StaticStr::empty();

pub fn init() {
    MESSAGE.init(UNLOCK_MESSAGE);
}

pub fn publish_unlock(ctx: Ctx, key: &RStr) {
    let channel = OwnedStr::new(&unlock_channel(key.as_ref()));
    let message = MESSAGE.get();
    let cluster = server::cluster();
    unsafe {
        match raw::RedisModule_PublishMessageShard {
            Some(shard_publish) if cluster => shard_publish(ctx.0, channel.ptr(), message),
            _ => rm!(RedisModule_PublishMessage(ctx.0, channel.ptr(), message)),
        };
        // In a cluster the message reaches the other nodes over the cluster bus.
        if cluster || server::online_replicas() == 0 {
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
