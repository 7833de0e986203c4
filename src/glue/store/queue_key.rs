//! `QueueKey`: a lock as something that outlives a command (queues, ties,
//! timers, undo records): its database and its key's bytes. The bytes are
//! shared (`Rc`): a queue of a thousand waiters, its deadline job and its
//! tie hold one copy of the key, not one each (a 1 MB key name cost 3.75 MB
//! per waiter when every waiter copied it).

use std::fmt;
use std::rc::Rc;

use hashbrown::Equivalent;

/// Who holds something the module keeps beyond a command (a tie): an
/// owner's bytes, or a permit's id; shared like the key's.
pub type Holder = Rc<[u8]>;

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueKey {
    pub db: i32,
    pub name: Rc<[u8]>,
}

/// A lock named by borrowed bytes (a command's argument): looks up a
/// `QueueKey` in a map without copying the name. Hashes exactly as
/// `QueueKey` does (the db, then the bytes).
#[derive(Hash)]
pub struct KeyRef<'a> {
    pub db: i32,
    pub name: &'a [u8],
}

impl Equivalent<QueueKey> for KeyRef<'_> {
    fn equivalent(&self, key: &QueueKey) -> bool {
        self.db == key.db && *self.name == *key.name
    }
}

impl QueueKey {
    pub fn new(db: i32, name: &[u8]) -> QueueKey {
        QueueKey {
            db,
            name: Rc::from(name),
        }
    }
}

impl fmt::Debug for QueueKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{:?}", self.db, String::from_utf8_lossy(&self.name))
    }
}
