//! Identities that outlive a command: a waiter in a queue, a call waiting
//! for replica acknowledgements, a client connection.

/// A client waiting in a queue (`LOCK.ACQUIRE ... BLOCK`). Unique for the
/// life of the process.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct WaiterId(pub u64);

/// A call whose reply waits for replica acknowledgements (`REPLICAS n ms`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct AckId(pub u64);

/// An answer waiting to be delivered to a blocked client.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct PendingId(pub u64);

/// A client connection (`CLIENT ID`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct ClientId(pub u64);

/// Hands out increasing ids.
#[derive(Default)]
pub struct Counter(u64);

impl Counter {
    pub fn next(&mut self) -> u64 {
        self.0 += 1;
        self.0
    }
}

/// What a KEEPALIVE tie keeps alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TieKind {
    /// A LOCK.* lock, held by the tie's holder (its owner).
    Lock,
    /// A semaphore's leased permit, the tie's holder being its id's 16 raw
    /// bytes.
    Permit,
    /// Every hold (READ and WRITE) of one owner of an RWLOCK.* lock: the
    /// tie's holder is the owner.
    Rw,
}
