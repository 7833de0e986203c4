//! Who gets a lock when it stops being held: the serve policy the module
//! runs whenever a queued lock may have become free (a release, a lease
//! deadline, a foreign delete, an undone grant).
//!
//! The head of the queue gets the lock if it is free, with the claim it
//! queued with (owner, lease, token). A head that cannot have it yet (the
//! lock is held) goes back in its place, so it never loses its turn. A
//! waiter the lock can never be given to (the key now holds something that
//! is not a lock, or its token counter is broken) is answered with the error
//! and the next one is tried: nobody waits forever behind a key that cannot
//! become a lock.

use super::error::LockError;
use super::queue::WaitQueue;
use super::rules::{self, Acquired, Claim};
use super::store::LockStore;

/// A queued client, as the policy sees it.
pub trait Waiting<N: ?Sized> {
    fn claim(&self) -> Claim<'_, N>;
}

/// A grant made to a waiter: what the lock now holds for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub holds: i64,
    pub token: Option<i64>,
}

/// The outcome of serving a queue: at most one grant (a lock has one
/// holder), and the waiters that were refused with an error, in queue order.
#[derive(Debug)]
pub struct Served<W> {
    pub granted: Option<(W, Grant)>,
    pub failed: Vec<(W, LockError)>,
}

impl<W> Served<W> {
    fn nothing() -> Served<W> {
        Served {
            granted: None,
            failed: Vec::new(),
        }
    }
}

/// Serves `queue` against the lock in `lock`. Writes the grant (if any)
/// through the store; the caller answers the clients.
pub fn serve<S, W>(lock: &mut S, queue: &mut WaitQueue<W>) -> Served<W>
where
    S: LockStore,
    W: Waiting<S::Name>,
{
    let mut served = Served::nothing();
    while let Some((ticket, waiter)) = queue.pop_front() {
        // `queued` is false: the head of the queue is who the queue waits for.
        match rules::acquire(lock, &waiter.claim(), false) {
            Ok(Acquired::Granted { holds, token }) => {
                served.granted = Some((waiter, Grant { holds, token }));
                break;
            }
            Ok(Acquired::Busy) => {
                queue.restore(ticket, waiter);
                break;
            }
            Err(e) => served.failed.push((waiter, e)),
        }
    }
    served
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::Lease;
    use crate::memory::{MemoryDb, Value};

    #[derive(Debug, PartialEq)]
    struct W(&'static [u8], bool);

    impl Waiting<[u8]> for W {
        fn claim(&self) -> Claim<'_, [u8]> {
            Claim {
                owner: self.0,
                lease: Lease::from_millis(100).unwrap(),
                token: self.1,
            }
        }
    }

    #[test]
    fn head_gets_a_free_lock_in_order() {
        let mut db = MemoryDb::new(10);
        let mut q = WaitQueue::default();
        q.push(W(b"a", false));
        q.push(W(b"b", true));
        let s = serve(&mut db.key(b"k"), &mut q);
        assert_eq!(
            s.granted,
            Some((
                W(b"a", false),
                Grant {
                    holds: 1,
                    token: None
                }
            ))
        );
        assert_eq!(db.deadline(b"k"), Some(110));
        // Held now: b stays first in line.
        let s = serve(&mut db.key(b"k"), &mut q);
        assert!(s.granted.is_none() && s.failed.is_empty());
        assert_eq!(q.front(), Some(&W(b"b", true)));
        db.advance(101);
        let s = serve(&mut db.key(b"k"), &mut q);
        let (w, g) = s.granted.unwrap();
        assert_eq!(w, W(b"b", true));
        assert_eq!(g.token, Some(111 * 1000));
        assert!(q.is_empty());
    }

    #[test]
    fn a_key_that_is_not_a_lock_fails_everyone() {
        let mut db = MemoryDb::new(0);
        db.put(b"k", Value::Other, None);
        let mut q = WaitQueue::default();
        q.push(W(b"a", false));
        q.push(W(b"b", false));
        let s = serve(&mut db.key(b"k"), &mut q);
        assert!(s.granted.is_none());
        assert_eq!(s.failed.len(), 2);
        assert!(s.failed.iter().all(|(_, e)| *e == LockError::WrongType));
        assert!(q.is_empty());
    }

    #[test]
    fn a_broken_token_counter_fails_only_who_asked_for_a_token() {
        let mut db = MemoryDb::new(0);
        db.put(
            b"redisson_lock_token:{k}",
            Value::Str(b"not a number".to_vec()),
            None,
        );
        let mut q = WaitQueue::default();
        q.push(W(b"a", true));
        q.push(W(b"b", false));
        let s = serve(&mut db.key(b"k"), &mut q);
        assert_eq!(s.failed, vec![(W(b"a", true), LockError::TokenNotInteger)]);
        assert_eq!(s.granted.map(|(w, _)| w), Some(W(b"b", false)));
    }
}
