//! `WaitQueue`: the clients waiting for one lock, in arrival order.
//!
//! Each waiter gets a `Ticket` when it joins; tickets only grow, so FIFO
//! order is ticket order. A waiter can leave from anywhere (timeout,
//! disconnect) in O(log n), and a head that could not be served yet goes
//! back in its old place (`restore`), so it never loses its turn.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(u64);

#[derive(Debug)]
pub struct WaitQueue<W> {
    next: u64,
    waiters: BTreeMap<u64, W>,
}

impl<W> Default for WaitQueue<W> {
    fn default() -> Self {
        WaitQueue {
            next: 0,
            waiters: BTreeMap::new(),
        }
    }
}

impl<W> WaitQueue<W> {
    /// Joins at the tail.
    pub fn push(&mut self, waiter: W) -> Ticket {
        let ticket = self.next;
        self.next += 1;
        self.waiters.insert(ticket, waiter);
        Ticket(ticket)
    }

    /// Takes the head: the next waiter to serve.
    pub fn pop_front(&mut self) -> Option<(Ticket, W)> {
        self.waiters.pop_first().map(|(t, w)| (Ticket(t), w))
    }

    /// Puts a waiter taken with `pop_front` back in its place.
    pub fn restore(&mut self, ticket: Ticket, waiter: W) {
        self.waiters.insert(ticket.0, waiter);
    }

    /// A waiter leaves (timeout, disconnect).
    pub fn remove(&mut self, ticket: Ticket) -> Option<W> {
        self.waiters.remove(&ticket.0)
    }

    /// A waiter still in the queue, by its ticket.
    pub fn get_mut(&mut self, ticket: Ticket) -> Option<&mut W> {
        self.waiters.get_mut(&ticket.0)
    }

    /// Takes every waiter out (to serve them elsewhere), leaving an empty
    /// queue that goes on numbering tickets where this one was, so whoever
    /// joins meanwhile lines up behind them.
    pub fn detach(&mut self) -> WaitQueue<W> {
        WaitQueue {
            next: self.next,
            waiters: std::mem::take(&mut self.waiters),
        }
    }

    /// Puts detached waiters back, in their places.
    pub fn attach(&mut self, mut detached: WaitQueue<W>) {
        self.waiters.append(&mut detached.waiters);
        self.next = self.next.max(detached.next);
    }

    pub fn front(&self) -> Option<&W> {
        self.waiters.first_key_value().map(|(_, w)| w)
    }

    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn fifo_with_leavers_and_restore() {
        let mut q = WaitQueue::default();
        let a = q.push("a");
        let b = q.push("b");
        q.push("c");
        assert_eq!(q.remove(b), Some("b"));
        assert_eq!(q.remove(b), None);
        let (t, head) = q.pop_front().unwrap();
        assert_eq!((t, head), (a, "a"));
        q.push("d");
        q.restore(t, head);
        let order: Vec<_> = std::iter::from_fn(|| q.pop_front().map(|(_, w)| w)).collect();
        assert_eq!(order, ["a", "c", "d"]);
        assert!(q.is_empty());
    }

    #[test]
    fn detach_and_attach_keep_places() {
        let mut q = WaitQueue::default();
        q.push("a");
        q.push("b");
        let mut out = q.detach();
        assert!(q.is_empty());
        let late = q.push("late");
        let (t, a) = out.pop_front().unwrap();
        out.restore(t, a);
        q.attach(out);
        assert_eq!(q.get_mut(late), Some(&mut "late"));
        let order: Vec<_> = std::iter::from_fn(|| q.pop_front().map(|(_, w)| w)).collect();
        assert_eq!(order, ["a", "b", "late"]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push,
        Pop,
        Leave(usize),
        PopRestore,
    }

    proptest! {
        // The queue behaves as a VecDeque from which anyone may leave.
        #[test]
        fn matches_a_deque(ops in proptest::collection::vec(prop_oneof![
            Just(Op::Push), Just(Op::Pop), (0..20usize).prop_map(Op::Leave), Just(Op::PopRestore)
        ], 0..200)) {
            let mut q = WaitQueue::default();
            let mut model: VecDeque<(Ticket, u32)> = VecDeque::new();
            let mut n = 0u32;
            for op in ops {
                match op {
                    Op::Push => { n += 1; let t = q.push(n); model.push_back((t, n)); }
                    Op::Pop => prop_assert_eq!(q.pop_front(), model.pop_front()),
                    Op::Leave(i) => if let Some(&(t, w)) = model.get(i) {
                        model.remove(i);
                        prop_assert_eq!(q.remove(t), Some(w));
                    },
                    Op::PopRestore => if let Some((t, w)) = q.pop_front() {
                        // A newcomer arrives before the head goes back.
                        n += 1;
                        let t2 = q.push(n);
                        model.push_back((t2, n));
                        q.restore(t, w);
                    },
                }
                prop_assert_eq!(q.len(), model.len());
                prop_assert_eq!(q.front(), model.front().map(|(_, w)| w));
            }
        }
    }
}
