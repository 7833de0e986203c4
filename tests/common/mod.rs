//! Shared integration-test harness: the `testkit` crate (a RESP client and
//! real Redis / Valkey servers) plus test-only helpers. Each test binary uses `mod common;`
//! and a subset of this, hence the `dead_code` allowance.
#![allow(dead_code, unused_imports, unused_macros)]

pub use testkit::{Client, Polled, Reply, ToArg};
pub use testkit::{KINDS, Kind, Server, ServerBuilder, args, resp, server, wait_until};

/// Turns `fn name(kind: Kind)` into one `#[test]` per server: `name::redis`
/// and `name::valkey` (so the two run in parallel and fail separately).
/// Attributes written before the name, e.g. `#[ignore = "BUG: ..."]`, apply
/// to both tests.
///
/// ```ignore
/// fn acquire_works(kind: Kind) { ... }
/// per_kind!(acquire_works, #[ignore = "BUG: ..."] known_bug);
/// ```
macro_rules! per_kind {
    ($($(#[$meta:meta])* $name:ident),* $(,)?) => {$(
        mod $name {
            $(#[$meta])*
            #[test]
            fn redis() {
                super::$name($crate::common::Kind::Redis)
            }
            $(#[$meta])*
            #[test]
            fn valkey() {
                super::$name($crate::common::Kind::Valkey)
            }
        }
    )*};
}
pub(crate) use per_kind;

/// Everything a client can observe about a key: `TYPE`, `DUMP` (the full
/// serialized value) and `PEXPIRETIME`. Equal before and after a command
/// means the command changed nothing at the key.
#[track_caller]
pub fn key_state(c: &mut Client, key: &[u8]) -> (Reply, Reply, Reply) {
    (
        c.cmd(&[&b"TYPE"[..], key]),
        c.cmd(&[&b"DUMP"[..], key]),
        c.cmd(&[&b"PEXPIRETIME"[..], key]),
    )
}

/// A hash's (field, value) pairs.
pub type HashPairs = Vec<(Vec<u8>, Vec<u8>)>;

/// A hash as (field, value) pairs in the server's order, and the key's
/// `PEXPIRETIME` (-2 missing, -1 no expiry). Works on RESP2 and RESP3.
#[track_caller]
pub fn hash_and_deadline(c: &mut Client, key: &[u8]) -> (HashPairs, i64) {
    let pairs = match c.cmd(&[&b"HGETALL"[..], key]) {
        Reply::Array(flat) => flat
            .chunks_exact(2)
            .map(|kv| (kv[0].as_bytes().to_vec(), kv[1].as_bytes().to_vec()))
            .collect(),
        Reply::Map(pairs) => pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect(),
        other => panic!("HGETALL {}: {other:?}", key.escape_ascii()),
    };
    let deadline = c.cmd(&[&b"PEXPIRETIME"[..], key]).as_int();
    (pairs, deadline)
}

/// The local wall clock in ms since the epoch (the servers run on this
/// machine, so it is their clock too).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock before 1970")
        .as_millis() as i64
}

/// A `TIME` reply in µs since the epoch, on the server's clock.
#[track_caller]
pub fn time_us(r: &Reply) -> i64 {
    let part = |i: usize| -> i64 {
        r.as_array()[i]
            .as_str()
            .parse()
            .unwrap_or_else(|e| panic!("TIME replied {r:?}: {e}"))
    };
    part(0) * 1_000_000 + part(1)
}

/// Sends `cmd` between two `TIME`s in one write (see
/// [`Client::send_pipeline`]); [`read_timed`] reads the replies later.
#[track_caller]
pub fn send_timed<A: AsRef<[u8]>>(c: &mut Client, cmd: &[A]) {
    let cmd: Vec<&[u8]> = cmd.iter().map(|a| a.as_ref()).collect();
    let time: [&[u8]; 1] = [b"TIME"];
    c.send_pipeline(&[&time[..], &cmd[..], &time[..]]);
}

/// A command's reply and when the server ran it, on its own clock.
#[derive(Debug)]
pub struct Timed {
    pub reply: Reply,
    /// Just before the command ran (µs).
    pub sent_us: i64,
    /// Just after its reply (µs): the trailing `TIME` waits in the query
    /// buffer while the command blocks and runs right after it is unblocked,
    /// in the same event-loop pass, whenever this process reads it.
    pub answered_us: i64,
}

impl Timed {
    /// From before the command ran to after its reply, in ms.
    pub fn took_ms(&self) -> f64 {
        (self.answered_us - self.sent_us) as f64 / 1000.0
    }
}

/// Reads the replies of [`send_timed`].
#[track_caller]
pub fn read_timed(c: &mut Client) -> Timed {
    let sent_us = time_us(&c.read_reply());
    let reply = c.read_reply();
    let answered_us = time_us(&c.read_reply());
    Timed {
        reply,
        sent_us,
        answered_us,
    }
}

pub mod topology;

/// Reads commands from a fake replica's stream (a client that sent `SYNC`)
/// until `SET marker <marker>`; returns them without the keep-alive and
/// framing commands. `all` gets every command read, framing included.
#[track_caller]
pub fn read_stream_until(
    fake: &mut Client,
    marker: &str,
    all: &mut Vec<Vec<Vec<u8>>>,
) -> Vec<Vec<Vec<u8>>> {
    let mut effects = Vec::new();
    loop {
        let got = fake
            .try_read_reply(std::time::Duration::from_secs(5))
            .expect("replication stream stalled");
        let cmd: Vec<Vec<u8>> = got
            .as_array()
            .iter()
            .map(|a| a.as_bytes().to_vec())
            .collect();
        all.push(cmd.clone());
        let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
        if matches!(
            name.as_str(),
            "PING" | "SELECT" | "MULTI" | "EXEC" | "REPLCONF"
        ) {
            continue;
        }
        if name == "SET" && cmd[1] == b"marker" && cmd[2] == marker.as_bytes() {
            return effects;
        }
        effects.push(cmd);
    }
}

/// Commands as text, one a line (for assertion messages).
pub fn show(cmds: &[Vec<Vec<u8>>]) -> String {
    cmds.iter()
        .map(|c| {
            c.iter()
                .map(|a| a.escape_ascii().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}
