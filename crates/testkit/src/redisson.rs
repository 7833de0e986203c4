//! Redisson's lock protocol as a Redisson client drives it: the Lua scripts
//! (our own text, written from Redisson's wire protocol (README, Redisson compatibility), with
//! Redisson's KEYS/ARGV layout) and the unlock channel naming. Deliberately
//! independent of the module's own implementation: tests compare the two.

/// RedissonLock.tryLockInnerAsync: KEYS[1] lock; ARGV[1] lease ms,
/// ARGV[2] owner. nil = acquired (or re-entered), else the PTTL.
pub const TRY_LOCK: &str = "\
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return nil; \
end; \
return redis.call('pttl', KEYS[1]);";

/// RedissonLock.unlockInnerAsync: KEYS[1] lock, KEYS[2] channel; ARGV[1]
/// unlock message, ARGV[2] lease ms, ARGV[3] owner. nil = not held by the
/// owner, 0 = still held (lease from now), 1 = freed and published.
pub const UNLOCK: &str = "\
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then \
    return nil; \
end; \
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
if (counter > 0) then \
    redis.call('pexpire', KEYS[1], ARGV[2]); \
    return 0; \
else \
    redis.call('del', KEYS[1]); \
    redis.call('publish', KEYS[2], ARGV[1]); \
    return 1; \
end; \
return nil;";

/// RedissonBaseLock.renewExpirationAsync (the watchdog): KEYS[1] lock;
/// ARGV[1] lease ms, ARGV[2] owner. 1 = renewed, 0 = not held.
pub const RENEW: &str = "\
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return 1; \
end; \
return 0;";

/// RedissonLock.forceUnlockAsync: KEYS[1] lock, KEYS[2] channel; ARGV[1]
/// unlock message. 1 = removed (and published), 0 = no lock.
pub const FORCE_UNLOCK: &str = "\
if (redis.call('del', KEYS[1]) == 1) then \
    redis.call('publish', KEYS[2], ARGV[1]); \
    return 1; \
else \
    return 0; \
end;";

/// RedissonFencedLock's acquire (Redisson 4.7):
/// KEYS[1] lock, KEYS[2] token counter; ARGV[1] lease ms, ARGV[2] owner.
/// `{-1, token}` = acquired (or re-entered: the token grows then too),
/// else `{pttl, -1}`.
pub const FENCED_TRY_LOCK: &str = "\
if (redis.call('exists', KEYS[1]) == 0 or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    local token = redis.call('incr', KEYS[2]); \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return {-1, token}; \
end; \
return {redis.call('pttl', KEYS[1]), -1};";

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
