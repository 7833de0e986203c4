//! Eviction would hand a held lock to someone else: every lock has a TTL, so
//! every `volatile-*` policy can evict locks, and every `allkeys-*` policy
//! too. The module warns in the server log at load and whenever the policy
//! or `maxmemory` changes, and `INFO lock` shows the warning while it holds.

use std::cell::RefCell;
use std::ffi::CStr;

use crate::glue::runtime::ffi::{Ctx, Level};
use crate::glue::store::server;

thread_local! {
    static WARNING: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Whether a changed config is one that decides eviction.
pub fn concerns(name: &CStr) -> bool {
    matches!(
        name.to_bytes(),
        b"maxmemory-policy" | b"maxmemory" | b"maxmemory_policy"
    )
}

/// Looks at the policy now; logs a warning when it can evict locks.
pub fn check(ctx: Ctx) {
    let warning = server::eviction_policy(ctx).and_then(|(policy, limited)| {
        (policy != "noeviction").then(|| {
            let when = if limited {
                "when memory reaches maxmemory"
            } else {
                "if maxmemory is set"
            };
            format!(
                "maxmemory-policy {policy} can evict held locks {when} (an evicted lock is free for anyone); use noeviction"
            )
        })
    });
    if let Some(text) = &warning {
        let changed = WARNING.with(|w| w.borrow().as_deref() != Some(text.as_str()));
        if changed {
            ctx.log(Level::Warning, &format!("lock module: {text}"));
        }
    }
    WARNING.with(|w| *w.borrow_mut() = warning);
}

/// The current warning, for INFO.
pub fn warning() -> Option<String> {
    WARNING.with(|w| w.borrow().clone())
}
