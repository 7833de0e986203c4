//! The unlock notification: message `0` on Redisson's channel, so Redisson
//! waiters (and anyone else listening) learn that the lock is free.
//!
//! Standalone: PUBLISH semantics. `RedisModule_PublishMessage` reaches this
//! server's subscribers only, so a PUBLISH is also sent down the replication
//! stream (replicas, not the AOF), as the PUBLISH command does — when
//! replicas are online (`server::online_replicas`). Propagating costs ~3,000
//! instructions even when nothing is propagated (measured), and a message
//! nobody can receive need not be sent; pub/sub is fire-and-forget, so this
//! never affects lock state.
//! Cluster: sharded publish, since the channel hashes to the key's slot.

use super::server;
use crate::core::channel::{UNLOCK_MESSAGE, unlock_channel};
use crate::glue::runtime::ffi::{Arg, Ctx, OwnedStr, RStr, StaticStr};

pub static MESSAGE: StaticStr = StaticStr::empty();

pub fn init() {
    MESSAGE.init(UNLOCK_MESSAGE);
}

pub fn publish_unlock(ctx: Ctx, key: &RStr) {
    let channel = OwnedStr::new(&unlock_channel(key.as_ref()));
    publish(ctx, &channel, MESSAGE.get());
}

/// Publishes `message` on `channel` as the PUBLISH command would
/// (standalone) or as SPUBLISH (cluster).
pub fn publish(ctx: Ctx, channel: &RStr, message: &RStr) {
    let cluster = server::cluster();
    ctx.publish(channel, message, cluster);
    // In a cluster the message reaches the other nodes over the cluster bus.
    if cluster || server::online_replicas() == 0 {
        return;
    }
    ctx.replicate_to_replicas(c"PUBLISH", &[Arg::Str(channel), Arg::Str(message)]);
}
