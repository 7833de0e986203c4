//! `INFO lock`: the module's counters (section `lock_stats`), what it holds
//! for connections right now, and deployment warnings (`lock_warnings`).

use std::ffi::CString;

use super::runtime::ffi::Ctx;
use super::runtime::register::{self, InfoSink};
use super::store::metrics;
use super::waiting::{acks, holds, queues, semaphore, ties};
use super::{eviction, stats};

pub fn register(ctx: Ctx) {
    register::info(ctx, info);
}

fn info(sink: &mut InfoSink) {
    sink.section(c"stats");
    sink.field(c"acquired", stats::ACQUIRED.get());
    sink.field(c"reentered", stats::REENTERED.get());
    sink.field(c"busy", stats::BUSY.get());
    sink.field(c"released", stats::RELEASED.get());
    sink.field(c"force_released", stats::FORCE_RELEASED.get());
    sink.field(c"renewed", stats::RENEWED.get());
    sink.field(c"not_owner", stats::NOT_OWNER.get());
    sink.field(c"unlock_published", stats::PUBLISHED.get());
    sink.field(c"blocked", stats::BLOCKED.get());
    sink.field(c"granted_after_wait", stats::GRANTED_AFTER_WAIT.get());
    sink.field(c"timed_out", stats::TIMED_OUT.get());
    sink.field(c"disconnected", stats::DISCONNECTED.get());
    sink.field(c"undelivered", stats::UNDELIVERED.get());
    let (waiting, queues) = queues::totals();
    sink.field(c"waiting", waiting as u64);
    sink.field(c"queues", queues as u64);
    sink.field(c"demoted", stats::DEMOTED.get());
    sink.field(c"keepalive_renewed", stats::KEEPALIVE_RENEWED.get());
    sink.field(c"keepalive_released", stats::KEEPALIVE_RELEASED.get());
    sink.field(c"noreplicas", stats::NOREPLICAS.get());
    sink.field(c"tied", ties::count() as u64);
    sink.field(c"awaiting_replicas", acks::count() as u64);
    sink.field(c"stale_grants", stats::STALE_GRANTS.get());
    // Semaphores (SEMAPHORE.*); their waits count in `blocked`,
    // `granted_after_wait`, `timed_out` above.
    sink.field(c"semaphore_acquired", stats::SEM_ACQUIRED.get());
    sink.field(c"semaphore_leased", stats::SEM_LEASED.get());
    sink.field(c"semaphore_busy", stats::SEM_BUSY.get());
    sink.field(c"semaphore_released", stats::SEM_RELEASED.get());
    sink.field(c"semaphore_returned", stats::SEM_RETURNED.get());
    sink.field(c"semaphore_not_leased", stats::SEM_NOT_LEASED.get());
    sink.field(c"semaphore_renewed", stats::SEM_RENEWED.get());
    sink.field(c"semaphore_expired", stats::SEM_EXPIRED.get());
    sink.field(
        c"semaphore_keepalive_returned",
        stats::SEM_KEEPALIVE_RETURNED.get(),
    );
    sink.field(c"semaphore_taken_back", stats::SEM_TAKEN_BACK.get());
    sink.field(c"semaphore_published", stats::SEM_PUBLISHED.get());
    sink.field(c"semaphore_sweeps", semaphore::sweeps() as u64);
    // Latches (LATCH.*).
    sink.field(c"latch_counted_down", stats::LATCH_COUNTED_DOWN.get());
    sink.field(c"latch_opened", stats::LATCH_OPENED.get());
    sink.field(
        c"latch_awaits_answered",
        stats::LATCH_RELEASED_WAITERS.get(),
    );
    // Leases that lapsed unseen become hold samples before they are shown.
    holds::settle_unnamed(super::runtime::ffi::Ctx::module().now());
    sink.field(c"holds_tracked", holds::count() as u64);
    sink.section(c"metrics");
    for (family, f) in metrics::snapshot() {
        let p = family.prefix();
        let mut field = |name: &str, value: u64| {
            if let Ok(name) = CString::new(format!("{p}_{name}")) {
                sink.field(&name, value);
            }
        };
        field("granted_immediately", f.immediate);
        field("wait_timeouts", f.timed_out);
        field("wait_samples", f.wait.samples());
        field("wait_p50_us", f.wait.quantile(0.5));
        field("wait_p99_us", f.wait.quantile(0.99));
        field("wait_p999_us", f.wait.quantile(0.999));
        field("wait_max_us", f.wait.max());
        field("hold_samples", f.hold.samples());
        field("hold_p50_us", f.hold.quantile(0.5));
        field("hold_p99_us", f.hold.quantile(0.99));
        field("hold_p999_us", f.hold.quantile(0.999));
        field("hold_max_us", f.hold.max());
    }
    if let Some(warning) = eviction::warning() {
        sink.section(c"warnings");
        sink.text(c"eviction", &warning);
    }
}
