//! The command table: every command (LOCK.*, SEMAPHORE.*, LATCH.*,
//! RWLOCK.*), described once. The parser
//! (`request`) reads its options from here, and the module registers each
//! command (name, arity, flags, key spec, ACL categories, COMMAND DOCS) from
//! the same entry, so a command's shape is written in exactly one place.

/// The module's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    Acquire,
    Release,
    Renew,
    Info,
    ForceRelease,
    SemCreate,
    SemAdd,
    SemAcquire,
    SemRelease,
    SemLease,
    SemReturn,
    SemRenew,
    SemInfo,
    SemDrain,
    LatchCreate,
    LatchCountDown,
    LatchAwait,
    LatchCount,
    RwAcquire,
    RwRelease,
    RwRenew,
    RwInfo,
    RwForceRelease,
    MAcquire,
    MRelease,
    Waiters,
}

/// Where a command's keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// One key, the first argument (key spec index 1, range 0).
    One,
    /// `numkeys key [key ...]`: the count at argument 1, the keys after it
    /// (key spec index 1, find-keys KEYNUM: keynumidx 0, firstkey 1, step 1).
    NumKeys,
}

/// An option a command accepts after its fixed arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    /// `PX ms | EX s`.
    Lease,
    /// `BLOCK ms`.
    Block,
    /// `KEEPALIVE`: tie the lock to the calling connection.
    KeepAlive,
    /// `TOKEN`: issue a fencing token.
    Token,
    /// `REPLICAS n ms`: reply once n replicas acknowledged the writes.
    Replicas,
    /// `COUNT n`: how many permits (n ≥ 1).
    Count,
    /// `READ | WRITE`: which hold of a read-write lock (required where taken).
    Mode,
}

impl Opt {
    const fn bit(self) -> u8 {
        1 << self as u8
    }

    /// How it reads in an error message and in COMMAND DOCS.
    pub fn usage(self) -> &'static str {
        match self {
            Opt::Lease => "PX ms | EX s",
            Opt::Block => "BLOCK ms",
            Opt::KeepAlive => "KEEPALIVE",
            Opt::Token => "TOKEN",
            Opt::Replicas => "REPLICAS n ms",
            Opt::Count => "COUNT n",
            Opt::Mode => "READ | WRITE",
        }
    }
}

/// How a command uses its key (ACL `%R~`/`%W~` patterns, COMMAND INFO).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAccess {
    /// Reads only (LOCK.INFO).
    Read,
    /// Reads and changes, possibly deleting (UPDATE and DELETE exclude each
    /// other in Redis's key specs; a release both decrements and deletes).
    Update,
    /// Deletes whatever is there.
    Delete,
}

/// An argument between the key and the options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedArg {
    /// As COMMAND DOCS shows it.
    pub name: &'static str,
    pub kind: ArgKind,
    /// One or more of it (`id [id ...]`): the last fixed argument only, and
    /// then the command takes no options.
    pub multiple: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    String,
    Integer,
}

const fn fixed(name: &'static str, kind: ArgKind) -> FixedArg {
    FixedArg {
        name,
        kind,
        multiple: false,
    }
}

const OWNER: &[FixedArg] = &[fixed("owner", ArgKind::String)];

/// Everything the server needs to know about a command.
#[derive(Debug)]
pub struct CommandSpec {
    pub command: Command,
    /// Lower case, as registered.
    pub name: &'static str,
    /// Redis arity, command name included (negative: at least that many).
    pub arity: i32,
    /// The first fixed argument after the key is `owner` (LOCK.*).
    pub takes_owner: bool,
    /// Every fixed argument after the key, `owner` included, in order.
    pub fixed: &'static [FixedArg],
    pub options: &'static [Opt],
    /// `options` as bits, for the parser's hot path.
    pub option_bits: u8,
    /// Redis command flags.
    pub flags: &'static str,
    /// ACL categories (servers that support setting them, 7.2+).
    pub acl: &'static str,
    pub access: KeyAccess,
    /// Whether the command can change the key (refused on replicas).
    pub writes: bool,
    pub summary: &'static str,
    pub complexity: &'static str,
    /// The `usage` hint of an unknown-option error.
    pub expected: &'static str,
}

const fn bits(options: &[Opt]) -> u8 {
    let mut bits = 0;
    let mut i = 0;
    while i < options.len() {
        bits |= options[i].bit();
        i += 1;
    }
    bits
}

const ACQUIRE_OPTIONS: &[Opt] = &[
    Opt::Lease,
    Opt::Block,
    Opt::KeepAlive,
    Opt::Token,
    Opt::Replicas,
];
const RENEW_OPTIONS: &[Opt] = &[Opt::Lease, Opt::KeepAlive, Opt::Replicas];

const SEM_ACQUIRE_OPTIONS: &[Opt] = &[Opt::Count, Opt::Block, Opt::Replicas];
const SEM_RELEASE_OPTIONS: &[Opt] = &[Opt::Count];
const SEM_LEASE_OPTIONS: &[Opt] = &[
    Opt::Count,
    Opt::Lease,
    Opt::KeepAlive,
    Opt::Block,
    Opt::Replicas,
];
const SEM_CREATE_OPTIONS: &[Opt] = &[Opt::Lease];
const LATCH_AWAIT_OPTIONS: &[Opt] = &[Opt::Block];
const RW_ACQUIRE_OPTIONS: &[Opt] = &[
    Opt::Mode,
    Opt::Lease,
    Opt::Block,
    Opt::KeepAlive,
    Opt::Token,
    Opt::Replicas,
];
const RW_RELEASE_OPTIONS: &[Opt] = &[Opt::Mode];
const MACQUIRE_OPTIONS: &[Opt] = &[Opt::Lease, Opt::Block, Opt::KeepAlive, Opt::Replicas];
const NUMKEYS_OWNER: &[FixedArg] = &[
    fixed("numkeys", ArgKind::Integer),
    FixedArg {
        name: "key",
        kind: ArgKind::String,
        multiple: true,
    },
    fixed("owner", ArgKind::String),
];

pub const COMMANDS: [CommandSpec; 26] = [
    CommandSpec {
        command: Command::Acquire,
        name: "lock.acquire",
        arity: -3,
        takes_owner: true,
        fixed: OWNER,
        options: ACQUIRE_OPTIONS,
        option_bits: bits(ACQUIRE_OPTIONS),
        flags: "write deny-oom",
        acl: "write slow blocking",
        access: KeyAccess::Update,
        writes: true,
        summary: "Takes or re-enters a reentrant lock, optionally waiting in a FIFO queue",
        complexity: "O(1)",
        expected: "unknown option, expected PX ms, EX s, BLOCK ms, KEEPALIVE, TOKEN or REPLICAS n ms",
    },
    CommandSpec {
        command: Command::Release,
        name: "lock.release",
        arity: 3,
        takes_owner: true,
        fixed: OWNER,
        options: &[],
        option_bits: 0,
        flags: "write fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Drops one hold of a lock; at zero frees it and serves the next waiter",
        complexity: "O(1)",
        expected: "",
    },
    CommandSpec {
        command: Command::Renew,
        name: "lock.renew",
        arity: -3,
        takes_owner: true,
        fixed: OWNER,
        options: RENEW_OPTIONS,
        option_bits: bits(RENEW_OPTIONS),
        flags: "write fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Extends the lease of a lock held by the owner; ties or unties it to the connection",
        complexity: "O(1)",
        expected: "unknown option, expected PX ms, EX s, KEEPALIVE or REPLICAS n ms",
    },
    CommandSpec {
        command: Command::Info,
        name: "lock.info",
        arity: 2,
        takes_owner: false,
        fixed: &[],
        options: &[],
        option_bits: 0,
        flags: "readonly fast",
        acl: "read fast",
        access: KeyAccess::Read,
        writes: false,
        summary: "Shows the owner, hold count, lease, waiters, tie and last token of a lock",
        complexity: "O(1)",
        expected: "",
    },
    CommandSpec {
        command: Command::ForceRelease,
        name: "lock.forcerelease",
        arity: 2,
        takes_owner: false,
        fixed: &[],
        options: &[],
        option_bits: 0,
        flags: "write fast",
        acl: "write fast",
        access: KeyAccess::Delete,
        writes: true,
        summary: "Removes a lock whoever holds it and serves the next waiter",
        complexity: "O(1)",
        expected: "",
    },
    CommandSpec {
        command: Command::SemCreate,
        name: "semaphore.create",
        arity: -3,
        takes_owner: false,
        fixed: &[fixed("permits", ArgKind::Integer)],
        options: SEM_CREATE_OPTIONS,
        option_bits: bits(SEM_CREATE_OPTIONS),
        flags: "write deny-oom fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Sets a semaphore's permits if the key does not exist (RSemaphore trySetPermits)",
        complexity: "O(1)",
        expected: "unknown option, expected PX ms or EX s",
    },
    CommandSpec {
        command: Command::SemAdd,
        name: "semaphore.add",
        arity: 3,
        takes_owner: false,
        fixed: &[fixed("delta", ArgKind::Integer)],
        options: &[],
        option_bits: 0,
        flags: "write deny-oom fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Adds (or with a negative delta removes) permits, keeping the TTL, and serves waiters",
        complexity: "O(1) plus O(N) for N waiters served",
        expected: "",
    },
    CommandSpec {
        command: Command::SemAcquire,
        name: "semaphore.acquire",
        arity: -2,
        takes_owner: false,
        fixed: &[],
        options: SEM_ACQUIRE_OPTIONS,
        option_bits: bits(SEM_ACQUIRE_OPTIONS),
        flags: "write deny-oom",
        acl: "write slow blocking",
        access: KeyAccess::Update,
        writes: true,
        summary: "Takes anonymous permits, optionally waiting in a FIFO queue",
        complexity: "O(1)",
        expected: "unknown option, expected COUNT n, BLOCK ms or REPLICAS n ms",
    },
    CommandSpec {
        command: Command::SemRelease,
        name: "semaphore.release",
        arity: -2,
        takes_owner: false,
        fixed: &[],
        options: SEM_RELEASE_OPTIONS,
        option_bits: bits(SEM_RELEASE_OPTIONS),
        flags: "write deny-oom fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Gives anonymous permits back and serves waiters",
        complexity: "O(1) plus O(N) for N waiters served",
        expected: "unknown option, expected COUNT n",
    },
    CommandSpec {
        command: Command::SemLease,
        name: "semaphore.lease",
        arity: -2,
        takes_owner: false,
        fixed: &[],
        options: SEM_LEASE_OPTIONS,
        option_bits: bits(SEM_LEASE_OPTIONS),
        flags: "write deny-oom",
        acl: "write slow blocking",
        access: KeyAccess::Update,
        writes: true,
        summary: "Takes permits with ids and optional leases (RPermitExpirableSemaphore), optionally waiting in a FIFO queue",
        complexity: "O(N log M) for N permits and M leased",
        expected: "unknown option, expected COUNT n, PX ms, EX s, KEEPALIVE, BLOCK ms or REPLICAS n ms",
    },
    CommandSpec {
        command: Command::SemReturn,
        name: "semaphore.return",
        arity: -3,
        takes_owner: false,
        fixed: &[FixedArg {
            name: "id",
            kind: ArgKind::String,
            multiple: true,
        }],
        options: &[],
        option_bits: 0,
        flags: "write fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Returns leased permits by id (all or none) and serves waiters",
        complexity: "O(N log M) for N ids and M leased",
        expected: "",
    },
    CommandSpec {
        command: Command::SemRenew,
        name: "semaphore.renew",
        arity: -3,
        takes_owner: false,
        fixed: &[fixed("id", ArgKind::String)],
        options: RENEW_OPTIONS,
        option_bits: bits(RENEW_OPTIONS),
        flags: "write fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Extends the lease of a leased permit; ties or unties it to the connection",
        complexity: "O(log M) for M leased",
        expected: "unknown option, expected PX ms, EX s, KEEPALIVE or REPLICAS n ms",
    },
    CommandSpec {
        command: Command::SemInfo,
        name: "semaphore.info",
        arity: 2,
        takes_owner: false,
        fixed: &[],
        options: &[],
        option_bits: 0,
        flags: "readonly fast",
        acl: "read fast",
        access: KeyAccess::Read,
        writes: false,
        summary: "Shows a semaphore's available and leased permits, waiters, ties and TTL",
        complexity: "O(log M) for M leased",
        expected: "",
    },
    CommandSpec {
        command: Command::SemDrain,
        name: "semaphore.drain",
        arity: 2,
        takes_owner: false,
        fixed: &[],
        options: &[],
        option_bits: 0,
        flags: "write fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Takes every available permit (the count set to 0, TTL kept)",
        complexity: "O(1)",
        expected: "",
    },
    CommandSpec {
        command: Command::LatchCreate,
        name: "latch.create",
        arity: 3,
        takes_owner: false,
        fixed: &[fixed("count", ArgKind::Integer)],
        options: &[],
        option_bits: 0,
        flags: "write deny-oom fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Sets a count-down latch's count if the key does not exist (RCountDownLatch trySetCount)",
        complexity: "O(1)",
        expected: "",
    },
    CommandSpec {
        command: Command::LatchCountDown,
        name: "latch.countdown",
        arity: 2,
        takes_owner: false,
        fixed: &[],
        options: &[],
        option_bits: 0,
        flags: "write fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Counts a latch down; at zero deletes it and answers every waiter",
        complexity: "O(1) plus O(N) for N waiters answered",
        expected: "",
    },
    CommandSpec {
        command: Command::LatchAwait,
        name: "latch.await",
        arity: -2,
        takes_owner: false,
        fixed: &[],
        options: LATCH_AWAIT_OPTIONS,
        option_bits: bits(LATCH_AWAIT_OPTIONS),
        flags: "readonly",
        acl: "read slow blocking",
        access: KeyAccess::Read,
        writes: false,
        summary: "Tells whether a latch is open, optionally waiting until it opens",
        complexity: "O(1)",
        expected: "unknown option, expected BLOCK ms",
    },
    CommandSpec {
        command: Command::LatchCount,
        name: "latch.count",
        arity: 2,
        takes_owner: false,
        fixed: &[],
        options: &[],
        option_bits: 0,
        flags: "readonly fast",
        acl: "read fast",
        access: KeyAccess::Read,
        writes: false,
        summary: "Shows a latch's count (0 when absent)",
        complexity: "O(1)",
        expected: "",
    },
    CommandSpec {
        command: Command::RwAcquire,
        name: "rwlock.acquire",
        arity: -4,
        takes_owner: true,
        fixed: OWNER,
        options: RW_ACQUIRE_OPTIONS,
        option_bits: bits(RW_ACQUIRE_OPTIONS),
        flags: "write deny-oom",
        acl: "write slow blocking",
        access: KeyAccess::Update,
        writes: true,
        summary: "Takes or re-enters a read or write hold of a read-write lock, optionally waiting in a FIFO queue where writers do not starve",
        complexity: "O(N) where N is the number of read holds on the lock",
        expected: "unknown option, expected READ, WRITE, PX ms, EX s, BLOCK ms, KEEPALIVE, TOKEN or REPLICAS n ms",
    },
    CommandSpec {
        command: Command::RwRelease,
        name: "rwlock.release",
        arity: 4,
        takes_owner: true,
        fixed: OWNER,
        options: RW_RELEASE_OPTIONS,
        option_bits: bits(RW_RELEASE_OPTIONS),
        flags: "write fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Drops one read or write hold of a read-write lock; serves the queue when it frees",
        complexity: "O(N) where N is the number of read holds on the lock",
        expected: "unknown option, expected READ or WRITE",
    },
    CommandSpec {
        command: Command::RwRenew,
        name: "rwlock.renew",
        arity: -3,
        takes_owner: true,
        fixed: OWNER,
        options: RENEW_OPTIONS,
        option_bits: bits(RENEW_OPTIONS),
        flags: "write fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Extends the lease of every hold the owner has on a read-write lock; ties or unties them to the connection",
        complexity: "O(N) where N is the number of read holds on the lock",
        expected: "unknown option, expected PX ms, EX s, KEEPALIVE or REPLICAS n ms",
    },
    CommandSpec {
        command: Command::RwInfo,
        name: "rwlock.info",
        arity: 2,
        takes_owner: false,
        fixed: &[],
        options: &[],
        option_bits: 0,
        flags: "readonly fast",
        acl: "read fast",
        access: KeyAccess::Read,
        writes: false,
        summary: "Shows the mode, writer, readers, holds, lease, waiters and ties of a read-write lock",
        complexity: "O(N) where N is the number of read holds on the lock",
        expected: "",
    },
    CommandSpec {
        command: Command::RwForceRelease,
        name: "rwlock.forcerelease",
        arity: 2,
        takes_owner: false,
        fixed: &[],
        options: &[],
        option_bits: 0,
        flags: "write fast",
        acl: "write fast",
        access: KeyAccess::Delete,
        writes: true,
        summary: "Removes a read-write lock (every hold and its timeout keys) whoever holds it and serves the queue",
        complexity: "O(N) where N is the number of read holds on the lock",
        expected: "",
    },
    CommandSpec {
        command: Command::MAcquire,
        name: "lock.macquire",
        arity: -4,
        takes_owner: false,
        fixed: NUMKEYS_OWNER,
        options: MACQUIRE_OPTIONS,
        option_bits: bits(MACQUIRE_OPTIONS),
        flags: "write deny-oom",
        acl: "write slow blocking",
        access: KeyAccess::Update,
        writes: true,
        summary: "Takes or re-enters several locks at once, all or none, optionally waiting in one arrival order across their queues",
        complexity: "O(N) where N is the number of keys",
        expected: "unknown option, expected PX ms, EX s, BLOCK ms, KEEPALIVE or REPLICAS n ms",
    },
    CommandSpec {
        command: Command::MRelease,
        name: "lock.mrelease",
        arity: -4,
        takes_owner: false,
        fixed: NUMKEYS_OWNER,
        options: &[],
        option_bits: 0,
        flags: "write fast",
        acl: "write fast",
        access: KeyAccess::Update,
        writes: true,
        summary: "Drops one hold of each of several locks held by the owner, all or none",
        complexity: "O(N) where N is the number of keys",
        expected: "",
    },
    CommandSpec {
        command: Command::Waiters,
        name: "lock.waiters",
        arity: 2,
        takes_owner: false,
        fixed: &[],
        options: &[],
        option_bits: 0,
        flags: "readonly fast",
        acl: "read fast",
        access: KeyAccess::Read,
        writes: false,
        summary: "Lists the clients queued at a key, in order: client id, owner, what each waits for, ms waited, ms left",
        complexity: "O(N) where N is the number of clients queued at the key",
        expected: "",
    },
];

impl CommandSpec {
    /// The (first, last, step) key positions of the legacy registration
    /// call; a command with `numkeys` declares none there (its key spec
    /// says where they are).
    pub fn legacy_key_range(&self) -> (i32, i32, i32) {
        match self.command.keys() {
            Keys::One => (1, 1, 1),
            Keys::NumKeys => (0, 0, 0),
        }
    }
}

impl Command {
    pub fn spec(self) -> &'static CommandSpec {
        // The table is in enum order (checked by a test).
        &COMMANDS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub fn arity(self) -> i32 {
        self.spec().arity
    }

    /// Whether the command takes `opt`.
    pub fn takes(self, opt: Opt) -> bool {
        self.spec().option_bits & opt.bit() != 0
    }

    /// Where the command's keys are.
    pub fn keys(self) -> Keys {
        match self {
            Command::MAcquire | Command::MRelease => Keys::NumKeys,
            _ => Keys::One,
        }
    }

    /// The options the command cannot do without (listed in `options` too):
    /// an RW lock's `READ | WRITE`.
    pub fn required(self) -> &'static [Opt] {
        match self {
            Command::RwAcquire | Command::RwRelease => &[Opt::Mode],
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_enum_order_and_consistent() {
        for (i, spec) in COMMANDS.iter().enumerate() {
            assert_eq!(spec.command as usize, i);
            assert!(
                ["lock.", "semaphore.", "latch.", "rwlock."]
                    .iter()
                    .any(|family| spec.name.starts_with(family)),
                "{}",
                spec.name
            );
            assert_eq!(spec.name, spec.name.to_lowercase());
            assert_eq!(spec.takes_owner, spec.fixed.first() == Some(&OWNER[0]));
            let numkeys = spec.command.keys() == Keys::NumKeys;
            assert_eq!(numkeys, spec.fixed == NUMKEYS_OWNER, "{}", spec.name);
            let multiple = !numkeys && spec.fixed.last().is_some_and(|a| a.multiple);
            // Variadic arguments and options cannot both follow the fixed ones.
            assert!(!multiple || spec.options.is_empty(), "{}", spec.name);
            // `numkeys key [key ...] owner`: one key counted in the arity.
            let required = spec.command.required();
            for opt in required {
                assert!(spec.options.contains(opt), "{}", spec.name);
            }
            let fixed = 2 + spec.fixed.len() as i32 - i32::from(numkeys) + required.len() as i32;
            let optional = spec.options.len() > required.len();
            if !optional && !multiple && !numkeys {
                assert_eq!(spec.arity, fixed, "{}", spec.name);
            } else {
                assert_eq!(spec.arity, -fixed, "{}", spec.name);
            }
            if spec.options.is_empty() {
                assert!(spec.expected.is_empty());
            } else {
                for opt in spec.options {
                    for word in opt.usage().split(' ').filter(|w| w.len() > 1) {
                        let word = word.trim_matches('|');
                        if !["ms", "s", "n"].contains(&word) {
                            assert!(spec.expected.contains(word), "{} {word}", spec.name);
                        }
                    }
                }
            }
            assert_eq!(spec.option_bits, bits(spec.options));
            assert_eq!(spec.writes, spec.access != KeyAccess::Read);
            assert_eq!(spec.flags.starts_with("write"), spec.writes);
            assert_eq!(spec.acl.starts_with("write"), spec.writes);
        }
    }
}
