//! The outcome of serving a queue, for primitives that may grant several
//! waiters at once (semaphores, latches). The same shape the lock's
//! `serve::Served` is being generalised to; the two are to be unified.

use super::error::LockError;

#[derive(Debug)]
pub struct Served<W, G> {
    /// Waiters granted, in queue order, with what each was given.
    pub granted: Vec<(W, G)>,
    /// Waiters refused with an error (the object can never serve them), in
    /// queue order.
    pub failed: Vec<(W, LockError)>,
}

impl<W, G> Default for Served<W, G> {
    fn default() -> Self {
        Served {
            granted: Vec::new(),
            failed: Vec::new(),
        }
    }
}
