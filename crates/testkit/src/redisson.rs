//! Redisson's lock protocol as real Redisson clients drive it: the Lua
//! scripts byte for byte as Redisson sends them (so their SHA1s are
//! Redisson's and EVALSHA works across both), Redisson's KEYS/ARGV layout,
//! and the unlock channel naming. Deliberately independent of the module's
//! own implementation: tests compare the two.
//!
//! Checked against real Redisson: the Java interop suite
//! (clients/java, `RedissonScriptsTest`) captures with MONITOR every script
//! Redisson 4.7.0 and 3.23.5 send for RLock and RFencedLock and requires
//! each to be one of these constants. Which version sends which:
//!
//! | operation | Redisson <= 3.21 | 3.22 - 3.23 | 3.24+ and 4.x |
//! |---|---|---|---|
//! | tryLock | [`TRY_LOCK`] | [`TRY_LOCK`] | [`TRY_LOCK`] |
//! | unlock | [`UNLOCK`] | [`UNLOCK_3_22`] | [`UNLOCK_3_24`] |
//! | forceUnlock | [`FORCE_UNLOCK`] | [`FORCE_UNLOCK_3_22`] | [`FORCE_UNLOCK_3_22`] |
//! | watchdog | [`RENEW`] | [`RENEW`] | [`RENEW_BATCH`] (4.7.0; the notes date it 3.44) |
//! | RFencedLock tryLock/lockAndGetToken | [`FENCED_TRY_LOCK`] | same | same |
//! | RFencedLock lock/tryLock | [`FENCED_LOCK`] | same | same |
//!
//! (<= 3.21: 3.21.3 checked by hand with MONITOR.) 3.22 moved the publish
//! command into an argument (`PUBLISH`, or `SPUBLISH` on a cluster);
//! 3.24 added the unlock latch (`redisson_unlock_latch:{name}:<request id>`,
//! read first, written with the answer, deleted by the client afterwards) so
//! a retried unlock returns the first answer. 4.x sends the scripts with
//! EVALSHA after SCRIPT LOAD.

/// RedissonLock.tryLockInnerAsync (every version): KEYS[1] lock; ARGV[1]
/// lease ms, ARGV[2] owner. nil = acquired (or re-entered), else the PTTL.
pub const TRY_LOCK: &str = "\
    if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return nil; \
    end; \
    return redis.call('pttl', KEYS[1]);";

/// RedissonLock.unlockInnerAsync, Redisson <= 3.21 (publish hard-coded):
/// KEYS[1] lock, KEYS[2] channel; ARGV[1] unlock message, ARGV[2] lease ms,
/// ARGV[3] owner. nil = not held by the owner, 0 = still held (lease from
/// now), 1 = freed and published.
pub const UNLOCK: &str = "\
    if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then \
    return nil;end; \
    local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
    if (counter > 0) then \
    redis.call('pexpire', KEYS[1], ARGV[2]); \
    return 0; \
    else redis.call('del', KEYS[1]); \
    redis.call('publish', KEYS[2], ARGV[1]); \
    return 1; \
    end; \
    return nil;";

/// RedissonLock.unlockInnerAsync, Redisson 3.22 - 3.23: as [`UNLOCK`] with
/// ARGV[4] the publish command (`PUBLISH`, `SPUBLISH` on a cluster).
pub const UNLOCK_3_22: &str = "\
    if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then \
    return nil;end; \
    local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
    if (counter > 0) then \
    redis.call('pexpire', KEYS[1], ARGV[2]); \
    return 0; \
    else redis.call('del', KEYS[1]); \
    redis.call(ARGV[4], KEYS[2], ARGV[1]); \
    return 1; \
    end; \
    return nil;";

/// RedissonLock.unlockInnerAsync, Redisson 3.24 and later (4.7.0 checked):
/// KEYS[1] lock, KEYS[2] channel, KEYS[3] unlock latch ([`unlock_latch`]);
/// ARGV[1] unlock message, ARGV[2] lease ms, ARGV[3] owner, ARGV[4] the
/// publish command, ARGV[5] the latch's PX. Answers as [`UNLOCK`], or the
/// latch's value when this request already ran; the client then DELs the latch.
pub const UNLOCK_3_24: &str = "\
    local val = redis.call('get', KEYS[3]); \
    if val ~= false then \
    return tonumber(val);end; \
    if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then \
    return nil;end; \
    local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
    if (counter > 0) then \
    redis.call('pexpire', KEYS[1], ARGV[2]); \
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]); \
    return 0; \
    else redis.call('del', KEYS[1]); \
    redis.call(ARGV[4], KEYS[2], ARGV[1]); \
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]); \
    return 1; \
    end; ";

/// RedissonBaseLock.renewExpirationAsync, the watchdog up to 3.2x (3.23.5
/// checked): KEYS[1] lock; ARGV[1] lease ms, ARGV[2] owner. 1 = renewed,
/// 0 = not held.
pub const RENEW: &str = "\
    if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return 1; \
    end; \
    return 0;";

/// renewal/LockTask, the batched watchdog of Redisson 4.x (4.7.0 checked):
/// KEYS = locks; ARGV[1] lease ms, ARGV[i + 1] the owner of KEYS[i]. An
/// array with 1 (renewed) or 0 (not held) per lock.
pub const RENEW_BATCH: &str = "\
    local result = {} for i = 1, #KEYS, 1 do \
    if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then \
    redis.call('pexpire', KEYS[i], ARGV[1]); \
    table.insert(result, 1); \
    else table.insert(result, 0); \
    end; \
    end; \
    return result;";

/// RedissonLock.forceUnlockAsync, Redisson <= 3.21: KEYS[1] lock, KEYS[2]
/// channel; ARGV[1] unlock message. 1 = removed (and published), 0 = no lock.
pub const FORCE_UNLOCK: &str = "\
    if (redis.call('del', KEYS[1]) == 1) then \
    redis.call('publish', KEYS[2], ARGV[1]); \
    return 1 else \
    return 0 end";

/// RedissonLock.forceUnlockAsync, Redisson 3.22 and later (4.7.0 checked):
/// as [`FORCE_UNLOCK`] with ARGV[2] the publish command.
pub const FORCE_UNLOCK_3_22: &str = "\
    if (redis.call('del', KEYS[1]) == 1) then \
    redis.call(ARGV[2], KEYS[2], ARGV[1]); \
    return 1 else \
    return 0 end";

/// RedissonFencedLock's token acquire (lockAndGetToken, tryLockAndGetToken):
/// KEYS[1] lock, KEYS[2] token counter; ARGV[1] lease ms, ARGV[2] owner.
/// `{-1, token}` = acquired (or re-entered: the token grows then too),
/// else `{pttl, -1}`.
pub const FENCED_TRY_LOCK: &str = "\
    if (redis.call('exists', KEYS[1]) == 0 or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    local token = redis.call('incr', KEYS[2]);redis.call('hincrby', KEYS[1], ARGV[2], 1); \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return {-1, token}; \
    end; \
    return {redis.call('pttl', KEYS[1]), -1};";

/// RedissonFencedLock's plain acquire (lock, tryLock): as [`TRY_LOCK`], and
/// the token counter KEYS[2] is incremented too.
pub const FENCED_LOCK: &str = "\
    if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    redis.call('incr', KEYS[2]);redis.call('hincrby', KEYS[1], ARGV[2], 1); \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return nil; \
    end; \
    return redis.call('pttl', KEYS[1]);";

/// LockPubSub.UNLOCK_MESSAGE.
pub const UNLOCK_MESSAGE: &str = "0";

/// RedissonObject.prefixName("redisson_lock__channel", name): braces are
/// added unless the name already contains `{`.
pub fn channel(key: &[u8]) -> Vec<u8> {
    let mut c = b"redisson_lock__channel:".to_vec();
    if key.contains(&b'{') {
        c.extend_from_slice(key);
    } else {
        c.push(b'{');
        c.extend_from_slice(key);
        c.push(b'}');
    }
    c
}

/// RedissonBaseLock.getUnlockLatchName (3.24 and later): the unlock
/// latch of one unlock request, in the lock's slot.
pub fn unlock_latch(key: &[u8], request_id: &str) -> Vec<u8> {
    let mut c = b"redisson_unlock_latch:".to_vec();
    if key.contains(&b'{') {
        c.extend_from_slice(key);
    } else {
        c.push(b'{');
        c.extend_from_slice(key);
        c.push(b'}');
    }
    c.push(b':');
    c.extend_from_slice(request_id.as_bytes());
    c
}

/// RedissonFencedLock's token counter: `redisson_lock_token:{name}`, the
/// channel's braces rule.
pub fn token_key(key: &[u8]) -> Vec<u8> {
    let mut c = b"redisson_lock_token:".to_vec();
    if key.contains(&b'{') {
        c.extend_from_slice(key);
    } else {
        c.push(b'{');
        c.extend_from_slice(key);
        c.push(b'}');
    }
    c
}
