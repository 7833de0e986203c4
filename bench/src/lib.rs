//! hashlock's load generator (`make bench`, `make bench-quick`) and the
//! overselling demo (`make demo`).
//!
//! One run starts one server with the module loaded, pins it and the client
//! to different cores, and runs every lock variant against it: hashlock's
//! LOCK.* commands, Redisson's protocol as Lua (EVALSHA and full-text EVAL),
//! SET NX PX with compare-and-delete, and the waiting strategies of each.

pub mod conn;
pub mod plan;
pub mod report;
pub mod run;
pub mod scripts;
pub mod setup;
pub mod svg;
pub mod timing;
pub mod workloads;
