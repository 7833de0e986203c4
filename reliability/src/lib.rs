//! hashlock's reliability suite (`make test` runs the short versions,
//! `make soak` the long ones and prints the figures).
//!
//! - R1 [`churn`]: mutual exclusion under churn, judged by [`checker`]; its
//!   round ([`round`]) and worker processes ([`workers`]) serve R6 too
//! - R2 [`crash`]: kill -9 / DEBUG RELOAD / SHUTDOWN and restart
//! - R3 [`failover`]: primary + replica, promotion; [`promotions`]: churn
//!   across promotions of one of two replicas, with and without REPLICAS
//! - R4 [`fuzz`]: hostile input against a live server
//! - R5 [`leaks`]: memory and blocked clients after millions of calls, and
//!   valgrind
//! - R6 [`cluster_churn`]: R1's churn on a 3x3 cluster through a
//!   cluster-aware client ([`cluster_client`], [`cluster_worker`]) while
//!   slots are resharded, replicas fail over and a primary is killed
//! - R7 [`semaphores`]: semaphores under churn with SIGKILLed workers,
//!   judged by [`semcheck`]; [`sempromo`]: across promotions with REPLICAS
//! - R8 [`rwmulti`]: read-write and multi-key locks under churn, judged by
//!   [`rwcheck`] and an observer of partial holds
//! - R7 and R8 run their workers through [`famproc`] (a SIGKILL leaves
//!   nothing ambiguous) and record them with [`famhist`]
//!
//! The module's lock core is the `hashlock-core` crate (plain Rust, no
//! Redis), used here for property tests and the model.

pub use hashlock_core as core;

pub mod checker;
pub mod churn;
pub mod clock;
pub mod cluster_churn;
pub mod cluster_client;
pub mod cluster_worker;
pub mod crash;
pub mod failover;
pub mod famhist;
pub mod famproc;
pub mod fuzz;
pub mod history;
pub mod leaks;
pub mod model;
pub mod promotions;
pub mod report;
pub mod round;
pub mod rwcheck;
pub mod rwmulti;
pub mod semaphores;
pub mod semcheck;
pub mod sempromo;
pub mod servers;
pub mod workers;
