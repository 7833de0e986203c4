//! hashlock: Redisson-compatible reentrant locks as native Redis/Valkey
//! commands (module `lock`).
//!
//! `core` holds the lock rules in plain Rust; `glue` (feature `module`, on by
//! default) is the Redis module around them.

pub mod core;

#[cfg(feature = "module")]
mod glue;

#[cfg(feature = "module")]
mod module {
    use std::sync::atomic::AtomicI64;

    use redis_module::configuration::ConfigurationFlags;
    use redis_module::redis_module;

    use crate::glue::{self, config};

    // Unit tests run without a server: the Redis allocator is not there.
    #[cfg(not(test))]
    type Allocator = redis_module::alloc::RedisAlloc;
    #[cfg(not(test))]
    const ALLOCATOR: Allocator = redis_module::alloc::RedisAlloc;
    #[cfg(test)]
    type Allocator = std::alloc::System;
    #[cfg(test)]
    const ALLOCATOR: Allocator = std::alloc::System;

    static DEFAULT_LEASE: &AtomicI64 = &config::DEFAULT_LEASE;

    redis_module! {
        name: "lock",
        version: 1_00_00,
        allocator: (Allocator, ALLOCATOR),
        data_types: [],
        init: init,
        configurations: [
            i64: [
                ["default-lease-ms", DEFAULT_LEASE, crate::core::Lease::WATCHDOG_DEFAULT.millis(), 1, config::MAX_DEFAULT_LEASE_MS, ConfigurationFlags::DEFAULT, None],
            ],
            string: [],
            bool: [],
            enum: [],
            module_args_as_configuration: true,
        ]
    }

    fn init(
        ctx: &redis_module::Context,
        args: &[redis_module::RedisString],
    ) -> redis_module::Status {
        glue::init(ctx, args)
    }
}
