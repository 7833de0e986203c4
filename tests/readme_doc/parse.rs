//! README.md → sessions of redis-cli steps (the convention is in
//! tests/readme.rs). Anything that looks like an example but does not follow
//! the convention is an error, never silently skipped.

/// `make run`'s port: every example must use it, as a reader's would.
pub const PORT: &str = "6380";
const MARKER: &str = "readme-test:";

/// A run of examples against one fresh server.
#[derive(Debug, Clone)]
pub struct Session {
    /// README line of the block that starts it.
    pub line: usize,
    /// The nearest `#` heading above that block.
    pub heading: String,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone)]
pub struct Step {
    /// README line of the command (or of the first line of a late reply).
    pub line: usize,
    pub terminal: u32,
    pub kind: StepKind,
}

#[derive(Debug, Clone)]
pub enum StepKind {
    /// `$ redis-cli -p 6380 CMD ...`: one command on a connection of its own.
    OneShot {
        args: Vec<Vec<u8>>,
        reply: Vec<String>,
    },
    /// `$ redis-cli -p 6380`: the terminal starts an interactive redis-cli
    /// (a new connection).
    Open,
    /// `redis> CMD ...` or `127.0.0.1:6380> CMD ...` on the terminal's
    /// connection. No reply lines: the command is still waiting.
    Command {
        args: Vec<Vec<u8>>,
        reply: Option<Vec<String>>,
    },
    /// Reply lines before any command in a block: the reply of the
    /// terminal's waiting command.
    LateReply { reply: Vec<String> },
}

#[derive(Debug, Default, PartialEq)]
struct Marker {
    skip: bool,
    continues: bool,
    terminal: Option<u32>,
}

/// Every checked session of `readme`, in order.
pub fn sessions(readme: &str) -> Result<Vec<Session>, String> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut sessions: Vec<Session> = Vec::new();
    let mut heading = String::new();
    let mut marker: Option<(usize, Marker)> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let no = i + 1;
        i += 1;
        // A region `make bench` writes (`<!-- bench:begin NAME -->` ...
        // `<!-- bench:end NAME -->`) is generated, never an example.
        if let Some(name) = bench_region(line, "begin") {
            if let Some((at, _)) = marker {
                return Err(format!(
                    "README.md:{at}: marker not followed by a code block"
                ));
            }
            let end = lines[i..]
                .iter()
                .position(|l| bench_region(l, "end") == Some(name))
                .ok_or_else(|| {
                    format!("README.md:{no}: `bench:begin {name}` without its `bench:end {name}`")
                })?;
            i += end + 1;
            continue;
        }
        if let Some(m) = parse_marker(line) {
            if let Some((at, _)) = marker {
                return Err(format!(
                    "README.md:{at}: marker not followed by a code block"
                ));
            }
            marker = Some((no, m.map_err(|e| format!("README.md:{no}: {e}"))?));
            continue;
        }
        let Some(info) = line.strip_prefix("```") else {
            if line.starts_with('#') {
                heading = line.trim_start_matches('#').trim().to_string();
            }
            if !line.trim().is_empty()
                && let Some((at, _)) = marker
            {
                return Err(format!(
                    "README.md:{at}: marker not followed by a code block"
                ));
            }
            continue;
        };
        let start = i;
        while i < lines.len() && !lines[i].starts_with("```") {
            i += 1;
        }
        let body = &lines[start..i];
        i += 1; // the closing fence
        let (marked_at, m) = match marker.take() {
            Some((at, m)) => (Some(at), m),
            None => (None, Marker::default()),
        };
        if m.skip {
            continue;
        }
        let console = matches!(
            info.trim(),
            "" | "console" | "text" | "sh" | "shell" | "bash"
        );
        if !console {
            if let Some(at) = marked_at {
                return Err(format!("README.md:{at}: marker before a ```{info} block"));
            }
            continue;
        }
        // A block of other shell commands (`$ make run`) is not an example.
        let has_cli = body.iter().any(|l| is_cli_line(l));
        if marked_at.is_none() && !has_cli {
            if let Some((n, l)) = body.iter().enumerate().find(|(_, l)| looks_like_reply(l)) {
                return Err(format!(
                    "README.md:{}: `{l}` looks like redis-cli output in a block without \
                     commands; mark the block (`<!-- {MARKER} continue terminal N -->` or \
                     `<!-- {MARKER} skip -->`)",
                    start + 1 + n
                ));
            }
            continue;
        }
        let steps = block_steps(body, start + 1, m.terminal.unwrap_or(1))?;
        let has_command = steps
            .iter()
            .any(|s| !matches!(s.kind, StepKind::LateReply { .. }));
        if m.continues {
            match sessions.last_mut() {
                Some(s) => s.steps.extend(steps),
                None => {
                    return Err(format!(
                        "README.md:{start}: `continue` with no earlier example"
                    ));
                }
            }
        } else {
            if !has_command {
                return Err(format!(
                    "README.md:{start}: a new session that has no command"
                ));
            }
            sessions.push(Session {
                line: start,
                heading: heading.clone(),
                steps,
            });
        }
    }
    if let Some((at, _)) = marker {
        return Err(format!(
            "README.md:{at}: marker not followed by a code block"
        ));
    }
    Ok(sessions)
}

/// `<!-- bench:begin NAME -->` (`which` = "begin") → Some(NAME).
fn bench_region<'a>(line: &'a str, which: &str) -> Option<&'a str> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    let name = inner.strip_prefix("bench:")?.strip_prefix(which)?;
    name.starts_with(' ').then(|| name.trim())
}

/// `<!-- readme-test: continue terminal 2 -->` → Some(Ok(..)); other lines → None.
fn parse_marker(line: &str) -> Option<Result<Marker, String>> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    let words = inner.strip_prefix(MARKER)?;
    let mut m = Marker::default();
    let mut it = words.split_whitespace();
    while let Some(w) = it.next() {
        match w {
            "skip" => m.skip = true,
            "continue" => m.continues = true,
            "terminal" => match it.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => m.terminal = Some(n),
                _ => return Some(Err("`terminal` needs a number from 1".into())),
            },
            other => return Some(Err(format!("unknown word `{other}` in a {MARKER} marker"))),
        }
    }
    if m.terminal.is_some() && !m.continues {
        return Some(Err("`terminal N` only makes sense with `continue`".into()));
    }
    Some(Ok(m))
}

/// A redis-cli command line: `$ redis-cli ...` or a prompt (a wrong one too,
/// so that it is reported).
fn is_cli_line(line: &str) -> bool {
    let first = line.split_whitespace().next().unwrap_or("");
    line.starts_with("$ redis-cli")
        || first == "redis>"
        || (first.ends_with('>') && first.contains(':'))
}

fn looks_like_reply(line: &str) -> bool {
    let l = line.trim_start();
    ["(integer)", "(nil)", "(error)", "(empty array)", "1) "]
        .iter()
        .any(|p| l.starts_with(p))
}

fn block_steps(body: &[&str], first_line: usize, terminal: u32) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    for (n, raw) in body.iter().enumerate() {
        let line = first_line + n;
        let at = |e: String| format!("README.md:{line}: {e}");
        if raw.trim().is_empty() {
            continue;
        }
        if let Some(shell) = raw.strip_prefix("$ ") {
            let words = split_args(shell, true).map_err(at)?;
            if words.first().map(Vec::as_slice) != Some(&b"redis-cli"[..]) {
                return Err(at(format!(
                    "`$ {shell}`: only redis-cli runs in an example"
                )));
            }
            let rest = &words[1..];
            if rest.len() < 2 || rest[0] != b"-p" || rest[1] != PORT.as_bytes() {
                return Err(at(format!(
                    "`$ {shell}`: say `redis-cli -p {PORT}` (make run's port) and no other option"
                )));
            }
            let kind = if rest.len() == 2 {
                StepKind::Open
            } else {
                StepKind::OneShot {
                    args: rest[2..].to_vec(),
                    reply: Vec::new(),
                }
            };
            steps.push(Step {
                line,
                terminal,
                kind,
            });
        } else if let Some(cmd) = strip_prompt(raw).map_err(at)? {
            let args = split_args(cmd, false).map_err(at)?;
            if args.is_empty() {
                return Err(at("a prompt without a command".into()));
            }
            steps.push(Step {
                line,
                terminal,
                kind: StepKind::Command { args, reply: None },
            });
        } else {
            let text = raw.to_string();
            match steps.last_mut().map(|s| &mut s.kind) {
                Some(StepKind::OneShot { reply, .. }) | Some(StepKind::LateReply { reply }) => {
                    reply.push(text)
                }
                Some(StepKind::Command { reply, .. }) => {
                    reply.get_or_insert_with(Vec::new).push(text)
                }
                Some(StepKind::Open) => {
                    return Err(at(
                        "output after `$ redis-cli -p 6380` with no command".into()
                    ));
                }
                None => steps.push(Step {
                    line,
                    terminal,
                    kind: StepKind::LateReply { reply: vec![text] },
                }),
            }
        }
    }
    for s in &steps {
        if let StepKind::OneShot { reply, .. } = &s.kind
            && reply.is_empty()
        {
            return Err(format!(
                "README.md:{}: a one-shot redis-cli shows no reply",
                s.line
            ));
        }
    }
    Ok(steps)
}

/// The command after `redis> ` or `127.0.0.1:6380> `; a prompt with another
/// address is an error.
fn strip_prompt(line: &str) -> Result<Option<&str>, String> {
    if let Some(cmd) = line.strip_prefix("redis> ") {
        return Ok(Some(cmd));
    }
    if let Some(cmd) = line.strip_prefix(&format!("127.0.0.1:{PORT}> ")) {
        return Ok(Some(cmd));
    }
    let first = line.split_whitespace().next().unwrap_or("");
    if first.ends_with('>') && first.contains(':') {
        return Err(format!(
            "prompt `{first}`: use `redis>` or `127.0.0.1:{PORT}>`"
        ));
    }
    Ok(None)
}

/// Splits a command line into arguments as redis-cli (`shell` false) or a
/// POSIX shell (`shell` true) would for the simple forms examples use:
/// blanks separate, "double quotes" take \" \\ \n \r \t \xHH escapes,
/// 'single quotes' are literal. In shell lines an unquoted `*`, `?` or `[`
/// is an error: the shell would expand it against the reader's files.
pub fn split_args(line: &str, shell: bool) -> Result<Vec<Vec<u8>>, String> {
    let b = line.as_bytes();
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() {
            return Ok(args);
        }
        let mut arg = Vec::new();
        while i < b.len() && !b[i].is_ascii_whitespace() {
            match b[i] {
                b'"' => {
                    i += 1;
                    loop {
                        match b.get(i) {
                            None => return Err(format!("unbalanced \" in `{line}`")),
                            Some(b'"') => break,
                            Some(b'\\') => {
                                let (byte, used) = escape(&b[i + 1..])
                                    .ok_or_else(|| format!("bad escape in `{line}`"))?;
                                arg.push(byte);
                                i += 1 + used;
                                continue;
                            }
                            Some(&c) => arg.push(c),
                        }
                        i += 1;
                    }
                    i += 1;
                }
                b'\'' => {
                    let end = b[i + 1..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .ok_or_else(|| format!("unbalanced ' in `{line}`"))?;
                    arg.extend_from_slice(&b[i + 1..i + 1 + end]);
                    i += end + 2;
                }
                c @ (b'*' | b'?' | b'[') if shell => {
                    return Err(format!(
                        "`{}` unquoted in `$ {line}`: the shell would expand it; quote it",
                        c as char
                    ));
                }
                c => {
                    arg.push(c);
                    i += 1;
                }
            }
        }
        args.push(arg);
    }
}

/// The byte an escape after a backslash stands for, and how many bytes of
/// `rest` it used.
fn escape(rest: &[u8]) -> Option<(u8, usize)> {
    Some(match *rest.first()? {
        b'n' => (b'\n', 1),
        b'r' => (b'\r', 1),
        b't' => (b'\t', 1),
        b'x' => {
            let hex = std::str::from_utf8(rest.get(1..3)?).ok()?;
            (u8::from_str_radix(hex, 16).ok()?, 3)
        }
        c => (c, 1),
    })
}
