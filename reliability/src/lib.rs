//! hashlock's reliability suite (`make test` runs the short versions,
//! `make soak` the long ones and prints the figures).
//!
//! - R1 [`churn`]: mutual exclusion under churn, judged by [`checker`]
//! - R2 [`crash`]: kill -9 / DEBUG RELOAD / SHUTDOWN and restart
//! - R3 [`failover`]: primary + replica, promotion; [`promotions`]: churn
//!   across promotions of one of two replicas, with and without REPLICAS
//! - R4 [`fuzz`]: hostile input against a live server
//! - R5 [`leaks`]: memory and blocked clients after millions of calls, and
//!   valgrind
//!
//! The module's lock core is the `hashlock-core` crate (plain Rust, no
//! Redis), used here for property tests and the model.

pub use hashlock_core as core;

pub mod checker;
pub mod churn;
pub mod clock;
pub mod crash;
pub mod failover;
pub mod fuzz;
pub mod history;
pub mod leaks;
pub mod model;
pub mod promotions;
pub mod report;
pub mod servers;
