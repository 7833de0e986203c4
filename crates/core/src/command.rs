//! The command table: every LOCK.* and RWLOCK.* command, described once. The parser
//! (`request`) reads its options from here, and the module registers each
//! command (name, arity, flags, key spec, ACL categories, COMMAND DOCS) from
//! the same entry, so a command's shape is written in exactly one place.

/// The commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    Acquire,
    Release,
    Renew,
    Info,
    ForceRelease,
    RwAcquire,
    RwRelease,
    RwRenew,
    RwInfo,
    RwForceRelease,
    MAcquire,
    MRelease,
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

/// Everything the server needs to know about a command.
#[derive(Debug)]
pub struct CommandSpec {
    pub command: Command,
    /// Lower case, as registered.
    pub name: &'static str,
    /// Redis arity, command name included (negative: at least that many).
    pub arity: i32,
    /// Fixed arguments after the key (`owner`).
    pub takes_owner: bool,
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

pub const COMMANDS: [CommandSpec; 12] = [
    CommandSpec {
        command: Command::Acquire,
        name: "lock.acquire",
        arity: -3,
        takes_owner: true,
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
        command: Command::RwAcquire,
        name: "rwlock.acquire",
        arity: -4,
        takes_owner: true,
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
        takes_owner: true,
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
        takes_owner: true,
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
];

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

    /// Where the command's keys are (a method, not a table column, so that
    /// entries added elsewhere need not spell it out).
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
                ["lock.", "rwlock."]
                    .iter()
                    .any(|p| spec.name.starts_with(p)),
                "{}",
                spec.name
            );
            // Name, the key (or numkeys and one key), the owner, the
            // required options (one word each).
            let keys = match spec.command.keys() {
                Keys::One => 1,
                Keys::NumKeys => 2,
            };
            let required = spec.command.required();
            let fixed = 1 + keys + i32::from(spec.takes_owner) + required.len() as i32;
            for opt in required {
                assert!(spec.options.contains(opt), "{}", spec.name);
            }
            let optional = spec.options.len() > required.len();
            if spec.command == Command::MRelease {
                // `numkeys key [key ...] owner`: variadic without options.
                assert_eq!(spec.arity, -fixed);
                assert!(spec.options.is_empty() && spec.expected.is_empty());
            } else if !optional {
                assert_eq!(spec.arity, fixed, "{}", spec.name);
                assert_eq!(spec.expected.is_empty(), spec.options.is_empty());
            } else {
                assert_eq!(spec.arity, -fixed, "{}", spec.name);
            }
            for opt in spec.options {
                for word in opt.usage().split(' ').filter(|w| w.len() > 1) {
                    let word = word.trim_matches('|');
                    if !["ms", "s", "n"].contains(&word) {
                        assert!(spec.expected.contains(word), "{} {word}", spec.name);
                    }
                }
            }
            assert_eq!(spec.option_bits, bits(spec.options));
            assert_eq!(spec.writes, spec.access != KeyAccess::Read);
            assert_eq!(spec.flags.starts_with("write"), spec.writes);
        }
    }
}
