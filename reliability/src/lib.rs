//! hashlock's reliability suite (`make test` runs the short versions,
//! `make soak` the long ones and prints the figures).
//!
//! - R1 [`churn`]: mutual exclusion under churn, judged by [`checker`]
//! - R2 [`crash`]: kill -9 / DEBUG RELOAD / SHUTDOWN and restart
//! - R3 [`failover`]: primary + replica, promotion
//! - R4 [`fuzz`]: hostile input against a live server
//! - R5 [`leaks`]: memory and blocked clients after millions of calls, and
//!   valgrind
//!
//! The module's lock core ([`core`]) is compiled in from `../src/core`
//! rather than taken as a dependency on the `hashlock` package: in a
//! workspace-wide build Cargo unifies that package's features, which would
//! turn its Redis glue on here, and with it the Redis allocator as this
//! binary's global allocator (it aborts outside a server). The same files,
//! no glue, no feature games.

#[path = "../../src/core/mod.rs"]
// Linted where it lives (the hashlock crate), not again here.
#[allow(clippy::all)]
pub mod core;

pub mod checker;
pub mod churn;
pub mod clock;
pub mod crash;
pub mod failover;
pub mod fuzz;
pub mod history;
pub mod leaks;
pub mod model;
pub mod report;
pub mod rng;
pub mod servers;
