//! The workloads of the issue: B1 uncontended pairs (+ server cost per
//! command), B2 renew, B3 contended hand-off, B4 crashed holder, B6 memory,
//! B7 killed holder process (KEEPALIVE), B8 surviving failover (REPLICAS,
//! TOKEN), B9 KEEPALIVE at scale, B10 queued locks sharing one deadline,
//! B11 the client libraries; the Redisson family: B12 overselling (one
//! lock, ten segmented locks, a semaphore), B13 server cost per call of
//! semaphores and read-write locks, B14 writer wait under a stream of
//! readers, B15 multi-key locks against Redisson's MultiLock.
//! B16 leader election (leader process killed).

pub mod b1;
pub mod b10;
pub mod b11;
pub mod b12;
pub mod b13;
pub mod b14;
pub mod b15;
pub mod b16;
pub mod b2;
pub mod b3;
pub mod b4;
pub mod b6;
pub mod b7;
pub mod b8;
pub mod b9;
pub mod contender;
pub mod holder;
pub mod pairs;
pub mod redisson;
