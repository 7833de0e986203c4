//! Plays a session's steps against a server and compares every reply with
//! the lines the README shows.

use std::collections::BTreeMap;
use std::time::Duration;

use testkit::Client;

use super::parse::{Session, Step, StepKind};
use super::render::{Line, render};

/// How long a shown reply may take to arrive (a loaded machine; an
/// unblocked waiter answers in well under a second).
const REPLY_WAIT: Duration = Duration::from_secs(10);
/// How long a command the README shows as waiting must stay unanswered.
const STILL_WAITING: Duration = Duration::from_millis(300);

/// What an interactive redis-cli prints when it starts reading messages.
const READING: &str = "Reading messages... (press Ctrl-C to quit)";

/// One redis-cli "terminal": its connection, the command it waits on, and
/// the line of the SUBSCRIBE it reads messages for (it takes no command
/// after that).
#[derive(Default)]
struct Terminal {
    client: Option<Client>,
    waiting: Option<(usize, Vec<Vec<u8>>)>,
    subscribed: Option<usize>,
}

/// Runs `session` against the server on `port` (fresh, module loaded).
/// Err explains the first difference, with README line numbers.
pub fn run_session(session: &Session, port: u16) -> Result<(), String> {
    let mut terminals: BTreeMap<u32, Terminal> = BTreeMap::new();
    // Generated ids (UUIDs, permit ids): the one the README shows → the one
    // the server made.
    let mut uuids: Vec<(String, String)> = Vec::new();
    for step in &session.steps {
        let Step {
            line,
            terminal,
            kind,
        } = step;
        let at = |e: String| format!("README.md:{line} (terminal {terminal}): {e}");
        let term = terminals.entry(*terminal).or_default();
        match kind {
            StepKind::Open => {
                if let Some((l, _)) = &term.waiting {
                    return Err(at(format!("a new redis-cli while line {l} still waits")));
                }
                term.client = Some(Client::connect(port));
            }
            StepKind::OneShot { args, reply } => {
                let args = substitute(args, &uuids);
                let got = Client::connect(port).cmd(&args);
                compare(reply, &render(&got, &args[0]), &mut uuids)
                    .map_err(|e| at(show(&args, e)))?;
            }
            StepKind::Command { args, reply } => {
                if term.subscribed.is_some() || is_subscribe(args) {
                    subscribe(term, port, *line, args, reply.as_deref()).map_err(at)?;
                    continue;
                }
                if let Some((l, _)) = &term.waiting {
                    return Err(at(format!("a command while line {l} still waits")));
                }
                let args = substitute(args, &uuids);
                let client = term.client.get_or_insert_with(|| Client::connect(port));
                client.send(&args);
                if args[0].eq_ignore_ascii_case(b"QUIT") {
                    // An interactive redis-cli (7.0.15) prints nothing for
                    // QUIT and exits: the server's +OK is read and dropped,
                    // and the connection closes.
                    if let Some(shown) = reply {
                        return Err(at(format!(
                            "redis-cli prints nothing for QUIT, the README shows {shown:?}"
                        )));
                    }
                    let _ = client.try_read_reply(REPLY_WAIT);
                    term.client = None;
                    continue;
                }
                match reply {
                    Some(shown) => {
                        let got = client.try_read_reply(REPLY_WAIT).ok_or_else(|| {
                            at(show(&args, format!("no reply within {REPLY_WAIT:?}")))
                        })?;
                        compare(shown, &render(&got, &args[0]), &mut uuids)
                            .map_err(|e| at(show(&args, e)))?;
                    }
                    None => {
                        if let Some(got) = client.try_read_reply(STILL_WAITING) {
                            return Err(at(show(
                                &args,
                                format!("shown waiting, but the server replied {got:?}"),
                            )));
                        }
                        term.waiting = Some((*line, args));
                    }
                }
            }
            StepKind::LateReply { reply }
                if term.waiting.is_none() && term.subscribed.is_some() =>
            {
                messages(term, reply).map_err(at)?;
            }
            StepKind::LateReply { reply } => {
                let Some((l, args)) = term.waiting.take() else {
                    return Err(at("a reply, but no command of this terminal waits".into()));
                };
                let client = term
                    .client
                    .as_mut()
                    .expect("a waiting terminal has a connection");
                let got = client.try_read_reply(REPLY_WAIT).ok_or_else(|| {
                    at(show(
                        &args,
                        format!("(sent at line {l}) no reply within {REPLY_WAIT:?}"),
                    ))
                })?;
                compare(reply, &render(&got, &args[0]), &mut uuids)
                    .map_err(|e| at(show(&args, format!("(sent at line {l}) {e}"))))?;
            }
        }
    }
    // A subscribed terminal got exactly the messages the README shows.
    for (n, term) in &mut terminals {
        if let (Some(l), Some(client)) = (term.subscribed, &mut term.client)
            && let Some(got) = client.try_read_reply(STILL_WAITING)
        {
            return Err(format!(
                "README.md:{l} (terminal {n}): a message the README does not show: {got:?}"
            ));
        }
    }
    // Whatever the README leaves waiting must really still wait.
    for (n, term) in &mut terminals {
        if let (Some((l, args)), Some(client)) = (&term.waiting, &mut term.client)
            && let Some(got) = client.try_read_reply(STILL_WAITING)
        {
            return Err(format!(
                "README.md:{l} (terminal {n}): {}",
                show(
                    args,
                    format!("left waiting, but the server replied {got:?}")
                )
            ));
        }
    }
    Ok(())
}

fn is_subscribe(args: &[Vec<u8>]) -> bool {
    ["SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"]
        .iter()
        .any(|c| c.as_bytes().eq_ignore_ascii_case(&args[0]))
}

/// `SUBSCRIBE ch ...` on a terminal: redis-cli prints READING, then one
/// confirmation per channel, and from then on reads messages only.
fn subscribe(
    term: &mut Terminal,
    port: u16,
    line: usize,
    args: &[Vec<u8>],
    reply: Option<&[String]>,
) -> Result<(), String> {
    if let Some(l) = term.subscribed {
        return Err(format!(
            "`{}`: redis-cli reads messages since the SUBSCRIBE at line {l} and takes no command",
            String::from_utf8_lossy(&args[0])
        ));
    }
    if let Some((l, _)) = &term.waiting {
        return Err(format!("a command while line {l} still waits"));
    }
    let shown = reply.unwrap_or_default();
    if shown.first().map(String::as_str) != Some(READING) {
        return Err(show(args, format!("redis-cli prints `{READING}` first")));
    }
    let client = term.client.get_or_insert_with(|| Client::connect(port));
    client.send(args);
    let mut got = Vec::new();
    for _ in 1..args.len() {
        let r = client
            .try_read_reply(REPLY_WAIT)
            .ok_or_else(|| show(args, format!("no confirmation within {REPLY_WAIT:?}")))?;
        got.extend(render(&r, &args[0]));
    }
    compare(&shown[1..], &got, &mut Vec::new()).map_err(|e| show(args, e))?;
    term.subscribed = Some(line);
    Ok(())
}

/// Messages shown on a subscribed terminal: read until as many lines have
/// been printed as the README shows.
fn messages(term: &mut Terminal, shown: &[String]) -> Result<(), String> {
    let client = term
        .client
        .as_mut()
        .expect("a subscribed terminal has a connection");
    let mut got = Vec::new();
    while got.len() < shown.len() {
        let Some(m) = client.try_read_reply(REPLY_WAIT) else {
            return Err(format!(
                "the README shows\n{}\nbut only this arrived within {REPLY_WAIT:?}:\n{}",
                shown.join("\n"),
                got.iter()
                    .map(|l: &Line| l.text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        };
        got.extend(render(&m, b"message"));
    }
    compare(shown, &got, &mut Vec::new())
}

fn show(args: &[Vec<u8>], e: String) -> String {
    let cmd: Vec<String> = args.iter().map(|a| a.escape_ascii().to_string()).collect();
    format!("`{}`: {e}", cmd.join(" "))
}

/// Replaces ids the README showed as generated (UUIDs, permit ids) with
/// the real ones.
fn substitute(args: &[Vec<u8>], uuids: &[(String, String)]) -> Vec<Vec<u8>> {
    args.iter()
        .map(|a| {
            match uuids
                .iter()
                .find(|(shown, _)| shown.as_bytes() == a.as_slice())
            {
                Some((_, real)) => real.as_bytes().to_vec(),
                None => a.clone(),
            }
        })
        .collect()
}

/// Shown lines against the rendered reply: equal, except a TTL-like
/// integer (any positive value matches a positive one), a client id or
/// time waited in LOCK.WAITERS (any integer ≥ 0 matches one ≥ 0), and a
/// generated id, a UUID or a permit id (any one matches, and is remembered
/// for later commands).
fn compare(
    shown: &[String],
    got: &[Line],
    uuids: &mut Vec<(String, String)>,
) -> Result<(), String> {
    let all_got = || {
        got.iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let differ = || {
        format!(
            "the README shows\n{}\nbut the server replied\n{}",
            shown.join("\n"),
            all_got()
        )
    };
    if shown.len() != got.len() {
        return Err(differ());
    }
    for (s, g) in shown.iter().zip(got) {
        if *s == g.text
            || (g.ttl_like && both_positive_ints(s, &g.text))
            || (g.count_like && both_counts(s, &g.text))
            || both_clock_tokens(s, &g.text)
        {
            continue;
        }
        let (s_masked, s_ids) = mask_uuids(s);
        let (g_masked, g_ids) = mask_uuids(&g.text);
        if s_ids.is_empty() || s_masked != g_masked || s_ids.len() != g_ids.len() {
            return Err(differ());
        }
        for (shown_id, real) in s_ids.into_iter().zip(g_ids) {
            match uuids.iter().find(|(s, _)| *s == shown_id) {
                Some((_, r)) if *r != real => {
                    return Err(format!(
                        "{shown_id} stands for two generated ids: {r} and {real}"
                    ));
                }
                Some(_) => {}
                None => uuids.push((shown_id, real)),
            }
        }
    }
    Ok(())
}

/// `6) (integer) 9893` and `6) (integer) 9999`: same text before the
/// number, both numbers positive.
fn both_positive_ints(shown: &str, got: &str) -> bool {
    let split = |l: &str| {
        l.rsplit_once(' ')
            .map(|(p, n)| (p.to_string(), n.parse::<i64>().ok()))
    };
    match (split(shown), split(got)) {
        (Some((ps, Some(ns))), Some((pg, Some(ng)))) => ps == pg && ns > 0 && ng > 0,
        _ => false,
    }
}

/// `4) (integer) 312` and `4) (integer) 0`: same text before the number,
/// both numbers ≥ 0 (a client id, a time already waited).
fn both_counts(shown: &str, got: &str) -> bool {
    let split = |l: &str| {
        l.rsplit_once(' ')
            .map(|(p, n)| (p.to_string(), n.parse::<i64>().ok()))
    };
    match (split(shown), split(got)) {
        (Some((ps, Some(ns))), Some((pg, Some(ng)))) => ps == pg && ns >= 0 && ng >= 0,
        _ => false,
    }
}

/// Fencing tokens start from the server clock (ms × 1000, about 1.8e15
/// today): an integer that large shown matches any integer that large.
fn both_clock_tokens(shown: &str, got: &str) -> bool {
    const CLOCK: i64 = 1_000_000_000_000_000;
    let split = |l: &str| {
        l.rsplit_once(' ')
            .map(|(p, n)| (p.to_string(), n.parse::<i64>().ok()))
    };
    match (split(shown), split(got)) {
        (Some((ps, Some(ns))), Some((pg, Some(ng)))) => ps == pg && ns >= CLOCK && ng >= CLOCK,
        _ => false,
    }
}

/// The line with every generated id replaced by a placeholder, and the ids
/// found: a UUID (8-4-4-4-12 lowercase hex: a generated owner) anywhere, or
/// a quoted string of 32 lowercase hex characters (a permit id from
/// SEMAPHORE.LEASE).
fn mask_uuids(line: &str) -> (String, Vec<String>) {
    const SHAPE: [usize; 5] = [8, 4, 4, 4, 12];
    let hex = |s: &str| {
        s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    };
    let is_uuid = |s: &str| {
        let parts: Vec<&str> = s.split('-').collect();
        parts.len() == 5 && parts.iter().zip(SHAPE).all(|(p, n)| p.len() == n && hex(p))
    };
    // `"<32 hex>"`: the id is the 32 characters inside the quotes.
    let is_permit =
        |s: &str| s.len() == 34 && s.starts_with('"') && s.ends_with('"') && hex(&s[1..33]);
    let mut masked = String::new();
    let mut found = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        // (where the match starts, where it ends, the id inside it)
        let hit = rest.char_indices().find_map(|(i, _)| {
            if rest.get(i..i + 36).is_some_and(is_uuid) {
                Some((i, i + 36, i..i + 36))
            } else if rest.get(i..i + 34).is_some_and(is_permit) {
                Some((i, i + 34, i + 1..i + 33))
            } else {
                None
            }
        });
        match hit {
            Some((at, end, id)) => {
                masked.push_str(&rest[..at]);
                masked.push_str("<id>");
                found.push(rest[id].to_string());
                rest = &rest[end..];
            }
            None => {
                masked.push_str(rest);
                break;
            }
        }
    }
    (masked, found)
}
