//! hashlock: Redisson-compatible reentrant locks as native Redis/Valkey
//! commands (module `lock`).
//!
//! `core` holds the lock rules in plain Rust; `glue` (feature `module`, on by
//! default) is the Redis module around them, entry points in `glue::module`.

pub mod core;

#[cfg(feature = "module")]
mod glue;

// Module memory is Redis's (INFO memory, maxmemory). Unit tests run without
// a server, so they keep the system allocator.
#[cfg(all(feature = "module", not(test)))]
#[global_allocator]
static ALLOCATOR: redis_module::alloc::RedisAlloc = redis_module::alloc::RedisAlloc;
