//! The worker processes of R1 and R6 as their runners see them: a slot per
//! worker id holding its current incarnation, what to report when one
//! fails, and the wait for all of them at the end.

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use crate::clock::{MS, mono_ns};

pub struct Slot {
    pub id: usize,
    pub incarnation: u32,
    pub child: Child,
    /// Where its stderr goes (a panic's message).
    pub stderr: PathBuf,
}

impl Slot {
    /// `worker w<id>.<incarnation> <what>: <its first stderr lines>`.
    pub fn failure(&self, what: &str) -> String {
        let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let err: String = err.lines().take(6).collect::<Vec<_>>().join(" | ");
        format!("worker w{}.{} {what}: {err}", self.id, self.incarnation)
    }
}

/// Waits for every worker to stop on its own (they stop at `until`, mono
/// ns); one still running `grace` later is killed. Returns the failures:
/// unsuccessful exits and workers that had to be killed.
pub fn wait_all(slots: &mut [Slot], until: u64, grace: Duration) -> Vec<String> {
    let deadline = until + grace.as_millis() as u64 * MS;
    let mut failures = Vec::new();
    for s in slots {
        loop {
            match s.child.try_wait() {
                Ok(Some(status)) => {
                    if !status.success() {
                        failures.push(s.failure(&format!("exited with {status}")));
                    }
                    break;
                }
                _ if mono_ns() > deadline => {
                    let _ = s.child.kill();
                    let _ = s.child.wait();
                    failures.push(
                        s.failure(&format!("did not stop {} s after the end", grace.as_secs())),
                    );
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
    failures
}
