//! Who gets an RW lock's queue served: strictly head-of-line. The head is
//! granted if the rules grant it now (as if no one were queued: nothing is
//! ahead of it), and so is the next head, and so on; the first head that
//! cannot be granted yet goes back in its place and serving stops. So a
//! READ head is granted together with every READ behind it up to the first
//! WRITE, and a WRITE head alone (only its own owner's READ or WRITE could
//! follow it: a downgrade or a re-entry). A waiter that never can be granted
//! (the key is not an RW lock, a WRITE whose owner now holds READ, a broken
//! token counter) is answered with the error, and the next one is tried.

use super::RwMode;
use super::rules::{self, Queued, RwAcquired, RwClaim};
use super::store::RwLockStore;
use crate::error::LockError;
use crate::queue::WaitQueue;

/// A queued client, as the policy sees it.
pub trait RwWaiting {
    fn claim(&self) -> RwClaim<'_>;
}

/// A grant made to a waiter: what the lock now holds for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RwGrant {
    pub mode: RwMode,
    /// The owner's holds of that mode (the reply).
    pub holds: i64,
    pub token: Option<i64>,
    /// The owner held nothing here before (`rwlock.acquired`).
    pub fresh: bool,
}

/// The outcome of serving a queue: the grants made, in queue order, and
/// the waiters refused with an error, in queue order.
#[derive(Debug)]
pub struct Served<W, G> {
    pub granted: Vec<(W, G)>,
    pub failed: Vec<(W, LockError)>,
}

/// Serves `queue` against the RW lock in `store`, writing each grant
/// through the store; the caller answers the clients. Holds that lapsed
/// are swept by the first grant attempt without being reported: call
/// `sweep` first when lifecycle events matter (it then finds nothing more).
pub fn serve<S, W>(store: &mut S, queue: &mut WaitQueue<W>) -> Served<W, RwGrant>
where
    S: RwLockStore,
    W: RwWaiting,
{
    let mut served = Served {
        granted: Vec::new(),
        failed: Vec::new(),
    };
    while let Some((ticket, waiter)) = queue.pop_front() {
        let claim = waiter.claim();
        let mode = claim.mode;
        match rules::acquire(store, &claim, Queued::NONE) {
            Ok(outcome) => match outcome.value {
                RwAcquired::Granted {
                    holds,
                    token,
                    fresh,
                } => served.granted.push((
                    waiter,
                    RwGrant {
                        mode,
                        holds,
                        token,
                        fresh,
                    },
                )),
                RwAcquired::Busy => {
                    queue.restore(ticket, waiter);
                    break;
                }
            },
            Err(e) => served.failed.push((waiter, e)),
        }
    }
    served
}
