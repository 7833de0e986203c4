//! hashlock: Redisson-compatible reentrant locks as native Redis/Valkey
//! commands (module `lock`).
//!
//! The lock rules live in the `hashlock-core` crate (plain Rust, no Redis);
//! `glue` is the Redis module around them, entry points in `glue::module`.

pub use hashlock_core as core;

mod glue;

// Module memory is Redis's (INFO memory, maxmemory). Unit tests run without
// a server, so they keep the system allocator.
#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: redis_module::alloc::RedisAlloc = redis_module::alloc::RedisAlloc;
