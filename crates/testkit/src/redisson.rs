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

// ---- RSemaphore (Redisson 4.7) ----
//
// The permit count is a string at the semaphore's name; every script that
// gives permits back publishes on `redisson_sc:{name}` with the publish
// command the client passes (`PUBLISH`, or `SPUBLISH` on a cluster).

/// RedissonSemaphore.tryAcquireAsync(permits): KEYS[1] semaphore; ARGV[1]
/// permits. 1 = taken (DECRBY), 0 = fewer available (or no key: 0
/// permits). Nothing is published.
pub const SEMAPHORE_TRY_ACQUIRE: &str = "\
local available = redis.call('get', KEYS[1]); \
if available == false or tonumber(available) < tonumber(ARGV[1]) then \
    return 0; \
end; \
redis.call('decrby', KEYS[1], ARGV[1]); \
return 1;";

/// RedissonSemaphore.releaseAsync(permits): KEYS[1] semaphore, KEYS[2]
/// channel; ARGV[1] permits, ARGV[2] publish command. INCRBY (creating the
/// key if needed), then publishes the new count, always. Replies nil.
pub const SEMAPHORE_RELEASE: &str = "\
local after = redis.call('incrby', KEYS[1], ARGV[1]); \
redis.call(ARGV[2], KEYS[2], after);";

/// RedissonSemaphore.trySetPermitsAsync(permits): KEYS[1] semaphore,
/// KEYS[2] channel; ARGV[1] permits, ARGV[2] publish command. 1 = set (and
/// `permits` published), 0 = the key exists (nothing changes).
pub const SEMAPHORE_TRY_SET_PERMITS: &str = "\
if redis.call('get', KEYS[1]) ~= false then \
    return 0; \
end; \
redis.call('set', KEYS[1], ARGV[1]); \
redis.call(ARGV[2], KEYS[2], ARGV[1]); \
return 1;";

/// RedissonSemaphore.trySetPermitsAsync(permits, ttl): as
/// `SEMAPHORE_TRY_SET_PERMITS`, ARGV[3] the TTL in ms (`SET ... PX`).
pub const SEMAPHORE_TRY_SET_PERMITS_TTL: &str = "\
if redis.call('get', KEYS[1]) ~= false then \
    return 0; \
end; \
redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3]); \
redis.call(ARGV[2], KEYS[2], ARGV[1]); \
return 1;";

/// RedissonSemaphore.addPermitsAsync(permits): KEYS[1] semaphore, KEYS[2]
/// channel; ARGV[1] delta (any sign), ARGV[2] publish command. A plain
/// `SET` of count + delta (a missing key counts 0), so **the key's TTL is
/// dropped**; publishes the new count, always. Replies nil.
pub const SEMAPHORE_ADD_PERMITS: &str = "\
local current = redis.call('get', KEYS[1]); \
if current == false then \
    current = 0; \
end; \
local after = tonumber(current) + tonumber(ARGV[1]); \
redis.call('set', KEYS[1], after); \
redis.call(ARGV[2], KEYS[2], after);";

// ---- RPermitExpirableSemaphore (Redisson 4.7) ----
//
// The same count string, plus the lease set `{name}:timeout`: member = the
// permit id's 16 raw bytes (the client shows them as 32 hex chars), score
// = the client's clock + lease, or `NO_LEASE`. Lapsed ids (score ≤ now)
// are swept back only when a script runs.

/// RedissonPermitExpirableSemaphore's `nonExpirableTimeout`: the score of a
/// permit without a lease.
pub const NO_LEASE: &str = "922337203685477";

/// RedissonPermitExpirableSemaphore.tryAcquireAsync (one EVAL for n ids):
/// KEYS[1] semaphore, KEYS[2] lease set, KEYS[3] channel; ARGV[1] n,
/// ARGV[2] the ids' score (client now + lease, or `NO_LEASE`), ARGV[3]
/// client now, ARGV[4] `NO_LEASE`, ARGV[5] publish command, ARGV[6..] the
/// n ids (16 raw bytes each, generated by the client).
///
/// First returns up to n lapsed ids to the count (publishing it when > 0).
/// Then, if n permits are available: DECRBY n, ZADD each id, the key's TTL
/// (if it has one) copied onto the lease set, reply `OK`. Otherwise reply
/// `:<lowest score>` when the lowest score is a real deadline (the client
/// sleeps until then), else nil.
pub const EXPIRABLE_ACQUIRE: &str = "\
local lapsed = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); \
if #lapsed > 0 then \
    redis.call('zrem', KEYS[2], unpack(lapsed)); \
    local back = redis.call('incrby', KEYS[1], #lapsed); \
    if tonumber(back) > 0 then \
        redis.call(ARGV[5], KEYS[3], back); \
    end; \
end; \
local available = redis.call('get', KEYS[1]); \
if available ~= false and tonumber(available) >= tonumber(ARGV[1]) then \
    redis.call('decrby', KEYS[1], ARGV[1]); \
    for i = 6, #ARGV do \
        redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); \
    end; \
    local ttl = redis.call('pttl', KEYS[1]); \
    if ttl > 0 then \
        redis.call('pexpire', KEYS[2], ttl); \
    end; \
    return 'OK'; \
end; \
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); \
if first[1] ~= nil and first[2] ~= ARGV[4] then \
    return ':' .. tostring(first[2]); \
end; \
return nil;";

/// RedissonPermitExpirableSemaphore.tryReleaseAsync(id): KEYS[1]
/// semaphore, KEYS[2] channel, KEYS[3] lease set; ARGV[1] id (16 raw
/// bytes), ARGV[2] `1` (permits per id), ARGV[3] client now, ARGV[4]
/// publish command.
///
/// 0 when the id is not in the set. Otherwise ZREM, INCRBY and publish the
/// new count — even when the id had lapsed, which then answers 0 (the
/// permit goes back all the same); 1 for a live id.
pub const EXPIRABLE_TRY_RELEASE: &str = "\
local score = redis.call('zscore', KEYS[3], ARGV[1]); \
if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then \
    return 0; \
end; \
local after = redis.call('incrby', KEYS[1], ARGV[2]); \
redis.call(ARGV[4], KEYS[2], after); \
if tonumber(score) <= tonumber(ARGV[3]) then \
    return 0; \
end; \
return 1;";

/// RedissonObject.prefixName("redisson_sc", name): the semaphores' channel.
pub fn semaphore_channel(name: &[u8]) -> Vec<u8> {
    let mut c = b"redisson_sc:".to_vec();
    if name.contains(&b'{') {
        c.extend_from_slice(name);
    } else {
        c.push(b'{');
        c.extend_from_slice(name);
        c.push(b'}');
    }
    c
}

/// RedissonObject.suffixName(name, "timeout"): the lease set.
pub fn timeout_key(name: &[u8]) -> Vec<u8> {
    let mut k = Vec::new();
    if name.contains(&b'{') {
        k.extend_from_slice(name);
    } else {
        k.push(b'{');
        k.extend_from_slice(name);
        k.push(b'}');
    }
    k.extend_from_slice(b":timeout");
    k
}

// ---- RCountDownLatch (Redisson 4.7) ----

/// CountDownLatchPubSub.ZERO_COUNT_MESSAGE: the latch opened.
pub const LATCH_ZERO_MESSAGE: &str = "0";
/// CountDownLatchPubSub.NEW_COUNT_MESSAGE: a count was set.
pub const LATCH_NEW_COUNT_MESSAGE: &str = "1";

/// RedissonCountDownLatch.trySetCountAsync(count): KEYS[1] latch, KEYS[2]
/// channel; ARGV[1] `1` (NEW_COUNT_MESSAGE), ARGV[2] count, ARGV[3]
/// publish command. 1 = set (and `1` published), 0 = the key exists.
pub const LATCH_TRY_SET_COUNT: &str = "\
if redis.call('exists', KEYS[1]) == 1 then \
    return 0; \
end; \
redis.call('set', KEYS[1], ARGV[2]); \
redis.call(ARGV[3], KEYS[2], ARGV[1]); \
return 1;";

/// RedissonCountDownLatch.countDownAsync: KEYS[1] latch, KEYS[2] channel;
/// ARGV[1] `0` (ZERO_COUNT_MESSAGE), ARGV[2] publish command. DECR; at 0
/// or below the key is deleted (a missing key is created at -1 and deleted
/// again); `0` is published only when the count reached exactly 0.
/// Replies nil.
pub const LATCH_COUNT_DOWN: &str = "\
local left = redis.call('decr', KEYS[1]); \
if left <= 0 then \
    redis.call('del', KEYS[1]); \
end; \
if left == 0 then \
    redis.call(ARGV[2], KEYS[2], ARGV[1]); \
end;";

/// RCountDownLatch's channel: `redisson_countdownlatch__channel__{name}`,
/// braces always added (not `prefixName`).
pub fn latch_channel(name: &[u8]) -> Vec<u8> {
    let mut c = b"redisson_countdownlatch__channel__{".to_vec();
    c.extend_from_slice(name);
    c.push(b'}');
    c
}

// ---- RReadWriteLock (REDISSON-FAMILY.md section 1) ----
//
// Redisson's read and write locks share one hash at the lock's name:
// `mode` -> `read` | `write`, a reader's `<owner>` -> its read holds, the
// writer's `<owner>:write` -> its write holds; every read hold `n` has a
// string key `<timeout prefix>:<n>` (value 1, its own lease). Scripts
// return nil when acquired, else the hash's PTTL; releases return nil (not
// held), 0 (still locked) or 1 (this owner's last hold of the mode went).
// The publish command (`PUBLISH`, or `SPUBLISH` on a cluster) and the
// unlock latch (a retried release answers as the first did) are arguments,
// as Redisson passes them.

/// RedissonReadLock's acquire: KEYS[1] lock, KEYS[2] the owner's timeout
/// prefix (`rwlock_timeout_prefix`); ARGV[1] lease ms, ARGV[2] owner,
/// ARGV[3] `<owner>:write`. Enters when the lock is free, in read mode
/// (past any waiting writer), or held for writing by this owner
/// (downgrade); each hold gets its own timeout key; the hash's TTL only
/// grows. nil = acquired, else the PTTL.
pub const RW_READ_LOCK: &str = "\
local mode = redis.call('hget', KEYS[1], 'mode'); \
if mode ~= false and mode ~= 'read' \
    and (mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0) then \
    return redis.call('pttl', KEYS[1]); \
end; \
if mode == false then \
    redis.call('hset', KEYS[1], 'mode', 'read'); \
end; \
local n = redis.call('hincrby', KEYS[1], ARGV[2], 1); \
redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1]); \
local left = redis.call('pttl', KEYS[1]); \
if mode == false or left < tonumber(ARGV[1]) then \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
end; \
return nil;";

/// RedissonReadLock's release: KEYS[1] lock, KEYS[2] channel, KEYS[3] the
/// owner's timeout prefix, KEYS[4] the key prefix (`rwlock_key_prefix`),
/// KEYS[5] unlock latch; ARGV[1] `0`, ARGV[2] owner, ARGV[3] publish
/// command, ARGV[4] latch PX. Drops the highest hold and its timeout key;
/// while other fields remain, the hash's TTL becomes the longest PTTL of
/// any timeout key of any field; if none is alive in read mode (dead
/// readers), the lock is deleted and `0` published. No lock at all:
/// publishes `0` and returns nil.
pub const RW_READ_UNLOCK: &str = "\
local answered = redis.call('get', KEYS[5]); \
if answered ~= false then \
    return tonumber(answered); \
end; \
local mode = redis.call('hget', KEYS[1], 'mode'); \
if mode == false then \
    redis.call(ARGV[3], KEYS[2], ARGV[1]); \
    redis.call('set', KEYS[5], 1, 'px', ARGV[4]); \
    return nil; \
end; \
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then \
    return nil; \
end; \
local left = redis.call('hincrby', KEYS[1], ARGV[2], -1); \
if left == 0 then \
    redis.call('hdel', KEYS[1], ARGV[2]); \
end; \
redis.call('del', KEYS[3] .. ':' .. (left + 1)); \
if redis.call('hlen', KEYS[1]) > 1 then \
    local longest = -3; \
    local all = redis.call('hgetall', KEYS[1]); \
    for i = 1, #all, 2 do \
        local holds = tonumber(all[i + 1]); \
        if holds ~= nil then \
            for n = 1, holds do \
                local ttl = redis.call('pttl', KEYS[4] .. ':' .. all[i] .. ':rwlock_timeout:' .. n); \
                if ttl > longest then longest = ttl; end; \
            end; \
        end; \
    end; \
    if longest > 0 or mode == 'write' then \
        if longest > 0 then \
            redis.call('pexpire', KEYS[1], longest); \
        end; \
        redis.call('set', KEYS[5], 0, 'px', ARGV[4]); \
        return 0; \
    end; \
end; \
redis.call('del', KEYS[1]); \
redis.call(ARGV[3], KEYS[2], ARGV[1]); \
redis.call('set', KEYS[5], 1, 'px', ARGV[4]); \
return 1;";

/// RedissonWriteLock's acquire: KEYS[1] lock; ARGV[1] lease ms, ARGV[2]
/// `<owner>:write`. Enters only a free lock, or re-enters its own write
/// lock (the lease is then added to the TTL left). nil = acquired, else
/// the PTTL.
pub const RW_WRITE_LOCK: &str = "\
local mode = redis.call('hget', KEYS[1], 'mode'); \
if mode == false then \
    redis.call('hset', KEYS[1], 'mode', 'write'); \
    redis.call('hset', KEYS[1], ARGV[2], 1); \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return nil; \
end; \
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then \
    return redis.call('pttl', KEYS[1]); \
end; \
redis.call('hincrby', KEYS[1], ARGV[2], 1); \
redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + tonumber(ARGV[1])); \
return nil;";

/// RedissonWriteLock's release: KEYS[1] lock, KEYS[2] channel, KEYS[3]
/// unlock latch; ARGV[1] `1`, ARGV[2] lease ms (reset on a partial
/// release), ARGV[3] `<owner>:write`, ARGV[4] publish command, ARGV[5]
/// latch PX. The last write hold: the lock is deleted and `1` published,
/// or, if read holds remain (a downgrade), the mode becomes `read` and
/// nothing is published. No lock at all: publishes `1`, returns nil.
pub const RW_WRITE_UNLOCK: &str = "\
local answered = redis.call('get', KEYS[3]); \
if answered ~= false then \
    return tonumber(answered); \
end; \
local mode = redis.call('hget', KEYS[1], 'mode'); \
if mode == false then \
    redis.call(ARGV[4], KEYS[2], ARGV[1]); \
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]); \
    return nil; \
end; \
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then \
    return nil; \
end; \
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
if left > 0 then \
    redis.call('pexpire', KEYS[1], ARGV[2]); \
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]); \
    return 0; \
end; \
redis.call('hdel', KEYS[1], ARGV[3]); \
if redis.call('hlen', KEYS[1]) > 1 then \
    redis.call('hset', KEYS[1], 'mode', 'read'); \
else \
    redis.call('del', KEYS[1]); \
    redis.call(ARGV[4], KEYS[2], ARGV[1]); \
end; \
redis.call('set', KEYS[3], 1, 'px', ARGV[5]); \
return 1;";

/// ReadLockTask's renewal (the read-lock watchdog, Redisson 4.4+): KEYS in
/// pairs (lock, key prefix); ARGV[1] lease ms, then for each pair the
/// number of this client's owners on that lock followed by those owners.
/// For each lock: every timeout key of each listed owner that holds it
/// gets the lease, and so does the hash (set, not maximised: it can
/// shorten another reader's). Returns one 1 (renewed) or 0 per lock.
pub const RW_READ_RENEW: &str = "\
local renewed = {}; \
local a = 2; \
for i = 1, #KEYS, 2 do \
    local alive = false; \
    local owners = tonumber(ARGV[a]); \
    a = a + 1; \
    for _ = 1, owners do \
        local owner = ARGV[a]; \
        a = a + 1; \
        local holds = redis.call('hget', KEYS[i], owner); \
        if holds ~= false then \
            alive = true; \
            for n = 1, tonumber(holds) do \
                redis.call('pexpire', KEYS[i + 1] .. ':' .. owner .. ':rwlock_timeout:' .. n, ARGV[1]); \
            end; \
        end; \
    end; \
    if alive then \
        redis.call('pexpire', KEYS[i], ARGV[1]); \
        table.insert(renewed, 1); \
    else \
        table.insert(renewed, 0); \
    end; \
end; \
return renewed;";

/// RedissonReadLock.forceUnlock: KEYS[1] lock, KEYS[2] channel; ARGV[1]
/// `0`, ARGV[2] publish command. Deletes only a read-mode lock (its timeout
/// keys are left to lapse). 1 = deleted.
pub const RW_READ_FORCE_UNLOCK: &str = "\
if redis.call('hget', KEYS[1], 'mode') ~= 'read' then \
    return 0; \
end; \
redis.call('del', KEYS[1]); \
redis.call(ARGV[2], KEYS[2], ARGV[1]); \
return 1;";

/// RedissonWriteLock.forceUnlock: as the read one, for a write-mode lock,
/// with ARGV[1] `1`.
pub const RW_WRITE_FORCE_UNLOCK: &str = "\
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then \
    return 0; \
end; \
redis.call('del', KEYS[1]); \
redis.call(ARGV[2], KEYS[2], ARGV[1]); \
return 1;";

/// The RW channel's UNLOCK_MESSAGE (a read release freed the lock: wakes
/// one waiter per Redisson instance).
pub const RW_UNLOCK_MESSAGE: &str = "0";
/// The RW channel's READ_UNLOCK_MESSAGE (a write release ended write mode,
/// or a force release: wakes every waiter).
pub const RW_READ_UNLOCK_MESSAGE: &str = "1";

/// `redisson_rwlock:{name}` (prefixName).
pub fn rwlock_channel(key: &[u8]) -> Vec<u8> {
    let mut c = b"redisson_rwlock:".to_vec();
    c.extend_from_slice(&rwlock_key_prefix_or_tag(key));
    c
}

/// `{name}`, or `name` when it contains `{`: the prefix of every timeout
/// key of the lock (RedissonReadLock.getKeyPrefix), the read release's
/// KEYS[4] and the renewal's second key of each pair.
pub fn rwlock_key_prefix(key: &[u8]) -> Vec<u8> {
    rwlock_key_prefix_or_tag(key)
}

fn rwlock_key_prefix_or_tag(key: &[u8]) -> Vec<u8> {
    if key.contains(&b'{') {
        key.to_vec()
    } else {
        let mut k = Vec::with_capacity(key.len() + 2);
        k.push(b'{');
        k.extend_from_slice(key);
        k.push(b'}');
        k
    }
}

/// `<key prefix>:<owner>:rwlock_timeout` (suffixName(name, owner) +
/// ":rwlock_timeout"): the read acquire's KEYS[2], the read release's
/// KEYS[3]; hold `n`'s key is this plus `:<n>`.
pub fn rwlock_timeout_prefix(key: &[u8], owner: &[u8]) -> Vec<u8> {
    let mut p = rwlock_key_prefix(key);
    p.push(b':');
    p.extend_from_slice(owner);
    p.extend_from_slice(b":rwlock_timeout");
    p
}

/// `<owner>:write`, the writer's field (RedissonWriteLock.getLockName).
pub fn rwlock_writer(owner: &[u8]) -> Vec<u8> {
    let mut w = owner.to_vec();
    w.extend_from_slice(b":write");
    w
}

/// `redisson_unlock_latch:{name}:<request id>` (prefixName, then the id):
/// the releases' unlock latch.
pub fn unlock_latch(key: &[u8], request_id: &[u8]) -> Vec<u8> {
    let mut l = b"redisson_unlock_latch:".to_vec();
    l.extend_from_slice(&rwlock_key_prefix_or_tag(key));
    l.push(b':');
    l.extend_from_slice(request_id);
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwlock_names() {
        assert_eq!(rwlock_channel(b"rw"), b"redisson_rwlock:{rw}");
        assert_eq!(rwlock_channel(b"u:{1}"), b"redisson_rwlock:u:{1}");
        assert_eq!(
            rwlock_timeout_prefix(b"rw", b"id:1"),
            b"{rw}:id:1:rwlock_timeout"
        );
        assert_eq!(
            rwlock_timeout_prefix(b"u:{1}", b"id:1"),
            b"u:{1}:id:1:rwlock_timeout"
        );
        assert_eq!(rwlock_key_prefix(b"rw"), b"{rw}");
        assert_eq!(rwlock_writer(b"id:1"), b"id:1:write");
        assert_eq!(unlock_latch(b"rw", b"7"), b"redisson_unlock_latch:{rw}:7");
        // The module's own names agree (computed independently).
        for key in [&b"rw"[..], b"u:{1}", b"a{b"] {
            let mut hold = rwlock_timeout_prefix(key, b"o");
            hold.extend_from_slice(b":3");
            assert_eq!(
                hold,
                hashlock_core::channel::rwlock_timeout_key(key, b"o", 3)
            );
            assert_eq!(
                rwlock_channel(key),
                hashlock_core::channel::rwlock_channel(key)
            );
        }
    }
}
