//! README.md's redis-cli examples as tests: parse them (parse.rs), play
//! them against a server and compare the replies (run.rs), printing
//! replies as redis-cli does (render.rs). The convention the README follows
//! is described in tests/readme.rs. Used by tests/readme.rs and
//! tests/make_run.rs.
#![allow(dead_code)]

pub mod parse;
pub mod render;
pub mod run;

pub use parse::{Session, sessions};
pub use run::run_session;

/// The repository's README.md.
pub fn readme() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// The whole README as one session, top to bottom, as a reader would play
/// it against one server: every block's steps in order, each session's
/// terminals kept apart (a new section's redis-cli is a new connection).
pub fn one_session(sessions: &[Session]) -> Session {
    let steps = sessions
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            s.steps.iter().map(move |step| parse::Step {
                terminal: (i as u32 + 1) * 100 + step.terminal,
                ..step.clone()
            })
        })
        .collect();
    Session {
        line: sessions.first().map_or(1, |s| s.line),
        heading: "the whole README, top to bottom".into(),
        steps,
    }
}

/// Plays every session with `play` (which starts a fresh server for it),
/// and reports every failure, not only the first.
pub fn check_all(
    sessions: &[Session],
    mut play: impl FnMut(&Session) -> Result<(), String>,
) -> Result<(), String> {
    let failures: Vec<String> = sessions
        .iter()
        .filter_map(|s| {
            play(s)
                .err()
                .map(|e| format!("session at README.md:{} ({}):\n{e}", s.line, s.heading))
        })
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n\n"))
    }
}
