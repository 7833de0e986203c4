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

/// One redis-cli "terminal": its connection and the command it waits on.
#[derive(Default)]
struct Terminal {
    client: Option<Client>,
    waiting: Option<(usize, Vec<Vec<u8>>)>,
    /// In subscribe mode (SUBSCRIBE and the like): `waiting` stays set, and
    /// each later block of the terminal shows the messages that arrived.
    subscribed: bool,
}

/// What redis-cli prints before the replies of a subscribe command.
const READING: &str = "Reading messages... (press Ctrl-C to quit)";

fn is_subscribe(command: &[u8]) -> bool {
    ["SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"]
        .iter()
        .any(|c| c.as_bytes().eq_ignore_ascii_case(command))
}

/// Runs `session` against the server on `port` (fresh, module loaded).
/// Err explains the first difference, with README line numbers.
pub fn run_session(session: &Session, port: u16) -> Result<(), String> {
    let mut terminals: BTreeMap<u32, Terminal> = BTreeMap::new();
    // Generated UUIDs: the one the README shows → the one the server made.
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
                if let Some((l, _)) = &term.waiting {
                    return Err(at(format!("a command while line {l} still waits")));
                }
                let args = substitute(args, &uuids);
                let client = term.client.get_or_insert_with(|| Client::connect(port));
                client.send(&args);
                match reply {
                    Some(shown) if is_subscribe(&args[0]) => {
                        // redis-cli's subscribe mode: the banner, then the
                        // confirmation (one channel); the terminal then
                        // waits for messages.
                        let got = client.try_read_reply(REPLY_WAIT).ok_or_else(|| {
                            at(show(&args, format!("no reply within {REPLY_WAIT:?}")))
                        })?;
                        let mut lines = vec![Line {
                            text: READING.to_string(),
                            ttl_like: false,
                        }];
                        lines.extend(render(&got, &args[0]));
                        compare(shown, &lines, &mut uuids).map_err(|e| at(show(&args, e)))?;
                        term.waiting = Some((*line, args));
                        term.subscribed = true;
                    }
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
            StepKind::LateReply { reply } if term.subscribed => {
                // The messages that arrived since, as many as the lines shown.
                let (l, args) = term.waiting.clone().expect("a subscribed terminal waits");
                let client = term
                    .client
                    .as_mut()
                    .expect("a waiting terminal has a connection");
                let mut lines = Vec::new();
                while lines.len() < reply.len() {
                    let got = client.try_read_reply(REPLY_WAIT).ok_or_else(|| {
                        at(show(
                            &args,
                            format!(
                                "(subscribed at line {l}) no message within {REPLY_WAIT:?}; the README shows\n{}",
                                reply.join("\n")
                            ),
                        ))
                    })?;
                    lines.extend(render(&got, b"message"));
                }
                compare(reply, &lines, &mut uuids)
                    .map_err(|e| at(show(&args, format!("(subscribed at line {l}) {e}"))))?;
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

fn show(args: &[Vec<u8>], e: String) -> String {
    let cmd: Vec<String> = args.iter().map(|a| a.escape_ascii().to_string()).collect();
    format!("`{}`: {e}", cmd.join(" "))
}

/// Replaces UUIDs the README showed as generated with the real ones.
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
/// integer (any positive value matches a positive one) and a UUID (any
/// UUID matches, and is remembered for later commands).
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
                        "{shown_id} stands for two generated UUIDs: {r} and {real}"
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

/// The line with every UUID (8-4-4-4-12 lowercase hex) replaced by a
/// placeholder, and the UUIDs found.
fn mask_uuids(line: &str) -> (String, Vec<String>) {
    const SHAPE: [usize; 5] = [8, 4, 4, 4, 12];
    let is_uuid = |s: &str| {
        let parts: Vec<&str> = s.split('-').collect();
        parts.len() == 5
            && parts.iter().zip(SHAPE).all(|(p, n)| {
                p.len() == n
                    && p.bytes()
                        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
            })
    };
    let mut masked = String::new();
    let mut found = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        match rest
            .char_indices()
            .find(|&(i, _)| rest.get(i..i + 36).is_some_and(is_uuid))
        {
            Some((i, _)) => {
                masked.push_str(&rest[..i]);
                masked.push_str("<uuid>");
                found.push(rest[i..i + 36].to_string());
                rest = &rest[i + 36..];
            }
            None => {
                masked.push_str(rest);
                break;
            }
        }
    }
    (masked, found)
}
