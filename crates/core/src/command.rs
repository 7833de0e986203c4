//! The command table: every LOCK.* command, described once. The parser
//! (`request`) reads its options from here, and the module registers each
//! command (name, arity, flags, key spec, ACL categories, COMMAND DOCS) from
//! the same entry, so a command's shape is written in exactly one place.

/// The LOCK.* commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    Acquire,
    Release,
    Renew,
    Info,
    ForceRelease,
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

/// Where a command's keys are (cluster routing, ACL key patterns, COMMAND GETKEYS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySpec {
    /// One key, the first argument.
    One,
    /// `numkeys key [key ...]` from the first argument.
    NumKeys,
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
    pub keys: KeySpec,
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

pub const COMMANDS: [CommandSpec; 5] = [
    CommandSpec {
        command: Command::Acquire,
        name: "lock.acquire",
        arity: -3,
        takes_owner: true,
        options: ACQUIRE_OPTIONS,
        option_bits: bits(ACQUIRE_OPTIONS),
        flags: "write deny-oom",
        acl: "write slow blocking",
        keys: KeySpec::One,
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
        keys: KeySpec::One,
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
        keys: KeySpec::One,
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
        keys: KeySpec::One,
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
        keys: KeySpec::One,
        access: KeyAccess::Delete,
        writes: true,
        summary: "Removes a lock whoever holds it and serves the next waiter",
        complexity: "O(1)",
        expected: "",
    },
];

impl CommandSpec {
    /// The (first, last, step) key positions of the legacy registration
    /// call; a command with `numkeys` declares none there (its key spec
    /// says where they are).
    pub fn legacy_key_range(&self) -> (i32, i32, i32) {
        match self.keys {
            KeySpec::One => (1, 1, 1),
            KeySpec::NumKeys => (0, 0, 0),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_enum_order_and_consistent() {
        for (i, spec) in COMMANDS.iter().enumerate() {
            assert_eq!(spec.command as usize, i);
            assert!(spec.name.starts_with("lock."));
            let fixed = 2 + i32::from(spec.takes_owner);
            if spec.options.is_empty() {
                assert_eq!(spec.arity, fixed, "{}", spec.name);
                assert!(spec.expected.is_empty());
            } else {
                assert_eq!(spec.arity, -fixed, "{}", spec.name);
                for opt in spec.options {
                    let word = opt.usage().split([' ', '|']).next().unwrap();
                    assert!(spec.expected.contains(word), "{} {word}", spec.name);
                }
            }
            assert_eq!(spec.option_bits, bits(spec.options));
            assert_eq!(spec.writes, spec.access != KeyAccess::Read);
            assert_eq!(spec.flags.starts_with("write"), spec.writes);
        }
    }
}
