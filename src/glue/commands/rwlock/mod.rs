//! RWLOCK.*: read-write locks in Redisson's `RReadWriteLock` layout (the
//! rules are the core's `rwlock`; serving, deadlines and deferred work are
//! `waiting::rwlock`). Each handler reads as the LOCK.* ones: parse → the
//! core's decision (writes replicated by `RwKey` as they are made) →
//! lifecycle events, queue served, message published, deadline armed →
//! reply. Before anything else, every writing call fires the events of a
//! hash Redis expired before the module's deadline job came round
//! (`rwlock::overdue`).

pub mod acquire;
pub mod force_release;
pub mod info;
pub mod release;
pub mod renew;
