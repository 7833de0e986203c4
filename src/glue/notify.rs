//! The unlock notification: message `0` on Redisson's channel, so Redisson
//! waiters (and anyone else listening) learn that the lock is free.
//!
//! Standalone: PUBLISH semantics. `RedisModule_PublishMessage` reaches this
//! server's subscribers only, so a PUBLISH is also sent down the replication
//! stream (flag `A`: replicas, not the AOF), as the PUBLISH command does.
//! Cluster: sharded publish, since the channel hashes to the key's slot.

use super::ffi::{Ctx, OwnedStr, RStr, StaticStr, raw};
use crate::core::channel::{UNLOCK_MESSAGE, unlock_channel};

pub static MESSAGE: StaticStr = StaticStr::empty();

pub fn init() {
    MESSAGE.init(UNLOCK_MESSAGE);
}

pub fn publish_unlock(ctx: Ctx, key: &RStr) {
    let channel = OwnedStr::new(ctx.0, &unlock_channel(key.as_ref()));
    let message = MESSAGE.get();
    unsafe {
        if ctx.has_flag(raw::REDISMODULE_CTX_FLAGS_CLUSTER) {
            if let Some(shard_publish) = raw::RedisModule_PublishMessageShard {
                shard_publish(ctx.0, channel.ptr(), message);
                return;
            }
            rm!(RedisModule_PublishMessage(ctx.0, channel.ptr(), message));
            return;
        }
        rm!(RedisModule_PublishMessage(ctx.0, channel.ptr(), message));
        rm!(RedisModule_Replicate(
            ctx.0,
            c"PUBLISH".as_ptr(),
            c"Ass".as_ptr(),
            channel.ptr(),
            message
        ));
    }
}
