//! A reply as redis-cli prints it on a terminal (redis-cli.c,
//! cliFormatReplyTTY), one entry per line, each flagged when its integer is
//! a time left (a TTL-like value, which examples cannot show exactly) or
//! another figure no example can show exactly (LOCK.WAITERS's client ids
//! and times waited).

use testkit::Reply;

pub struct Line {
    pub text: String,
    pub ttl_like: bool,
    /// A client id or a time already waited: any integer ≥ 0 shown matches
    /// any integer ≥ 0.
    pub count_like: bool,
}

/// `command` is the command's name, for TTL-like whole replies (PTTL, ...)
/// and LOCK.WAITERS (client ids, ms waited, ms left: every integer in it).
pub fn render(reply: &Reply, command: &[u8]) -> Vec<Line> {
    let ttl_command = ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME", "LOCK.WAITERS"]
        .iter()
        .any(|c| c.as_bytes().eq_ignore_ascii_case(command));
    let mut out = String::new();
    let mut flags = Vec::new();
    format(reply, "", ttl_command, &mut out, &mut flags);
    let mut lines: Vec<Line> = out
        .lines()
        .zip(flags)
        .map(|(text, ttl_like)| Line {
            text: text.to_string(),
            ttl_like,
            count_like: false,
        })
        .collect();
    if b"LOCK.WAITERS".eq_ignore_ascii_case(command) {
        waiters_vary(reply, &mut lines);
    }
    lines
}

/// LOCK.WAITERS: one array of five per waiter (client id, owner, what it
/// waits for, ms waited, ms left), each element one line. The client id
/// and the ms waited differ from run to run; the ms left is a time left
/// (`-1`, waiting forever, stays exact).
fn waiters_vary(reply: &Reply, lines: &mut [Line]) {
    let Reply::Array(waiters) = reply else { return };
    let one_line = |r: &Reply| !matches!(r, Reply::Array(_) | Reply::Map(_) | Reply::Set(_));
    let shaped = waiters
        .iter()
        .all(|w| matches!(w, Reply::Array(e) if e.len() == 5 && e.iter().all(one_line)));
    if !shaped || lines.len() != waiters.len() * 5 {
        return;
    }
    for w in 0..waiters.len() {
        lines[w * 5].count_like = true;
        lines[w * 5 + 3].count_like = true;
        lines[w * 5 + 4].ttl_like = true;
    }
}

/// Appends `r` to `out`; every `\n` written pushes one flag.
fn format(r: &Reply, prefix: &str, ttl_like: bool, out: &mut String, flags: &mut Vec<bool>) {
    let mut leaf = |text: String, ttl: bool| {
        for _ in text.lines() {
            flags.push(ttl);
        }
        out.push_str(&text);
        out.push('\n');
    };
    match r {
        Reply::Int(i) => leaf(format!("(integer) {i}"), ttl_like),
        Reply::Status(s) => leaf(s.clone(), false),
        Reply::Error(e) => leaf(format!("(error) {e}"), false),
        Reply::Bulk(b) => leaf(repr(b), false),
        Reply::Nil | Reply::NilArray | Reply::Null => leaf("(nil)".into(), false),
        Reply::Double(d) => leaf(format!("(double) {d}"), false),
        Reply::Bool(b) => leaf(format!("({b})"), false),
        Reply::BigNumber(n) => leaf(format!("(big number) {n}"), false),
        Reply::Verbatim(_, b) => leaf(String::from_utf8_lossy(b).into_owned(), false),
        Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => {
            let sep = if matches!(r, Reply::Set(_)) { '~' } else { ')' };
            let items: Vec<(&Reply, Option<&Reply>)> = v.iter().map(|e| (e, None)).collect();
            list(&items, sep, prefix, ttl_like, out, flags);
        }
        Reply::Map(pairs) => {
            let items: Vec<(&Reply, Option<&Reply>)> =
                pairs.iter().map(|(k, v)| (k, Some(v))).collect();
            list(&items, '#', prefix, ttl_like, out, flags);
        }
    }
}

/// redis-cli's numbered list: `1) a`, nested lists indented under their
/// number; map entries print as `1# key => value`. `all_ttl`: every
/// integer in it is a time left (or another value examples cannot show).
fn list(
    items: &[(&Reply, Option<&Reply>)],
    sep: char,
    prefix: &str,
    all_ttl: bool,
    out: &mut String,
    flags: &mut Vec<bool>,
) {
    if items.is_empty() {
        flags.push(false);
        out.push_str(if sep == '#' {
            "(empty hash)\n"
        } else {
            "(empty array)\n"
        });
        return;
    }
    let width = items.len().to_string().len();
    let nested = format!("{prefix}{}", " ".repeat(width + 2));
    let mut previous_is_ttl_name = false;
    for (i, (item, value)) in items.iter().enumerate() {
        out.push_str(&format!(
            "{}{:>width$}{sep} ",
            if i == 0 { "" } else { prefix },
            i + 1
        ));
        match value {
            None => format(item, &nested, all_ttl || previous_is_ttl_name, out, flags),
            Some(v) => {
                let mut key = String::new();
                let mut key_flags = Vec::new();
                format(item, &nested, false, &mut key, &mut key_flags);
                out.push_str(key.trim_end_matches('\n'));
                out.push_str(" => ");
                format(v, &nested, names_ttl(item), out, flags);
            }
        }
        // LOCK.INFO's flat RESP2 form: the value after "ttl" is a time left.
        previous_is_ttl_name = value.is_none() && names_ttl(item);
    }
}

/// The field name `ttl` (LOCK.INFO), whose value is a time left.
fn names_ttl(r: &Reply) -> bool {
    match r {
        Reply::Bulk(k) => k == b"ttl",
        Reply::Status(k) => k == "ttl",
        _ => false,
    }
}

/// sdscatrepr: a quoted, escaped string.
fn repr(b: &[u8]) -> String {
    let mut s = String::from("\"");
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x07 => s.push_str("\\a"),
            0x08 => s.push_str("\\b"),
            c if c.is_ascii_graphic() || c == b' ' => s.push(c as char),
            c => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('"');
    s
}
