//! `INFO lock`: the module's counters (section `lock_stats`), what it holds
//! for connections right now, and deployment warnings (`lock_warnings`).

use std::ffi::{CStr, CString, c_int};

use super::runtime::ffi::raw;
use super::runtime::firewall;
use super::waiting::{acks, queues, ties};
use super::{eviction, stats};

pub fn register(ctx: super::runtime::ffi::Ctx) {
    unsafe {
        rm!(RedisModule_RegisterInfoFunc(ctx.0, Some(info)));
    }
}

unsafe extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    firewall::callback((), || {
        let field = |name: &CStr, value: u64| unsafe {
            rm!(RedisModule_InfoAddFieldULongLong(ctx, name.as_ptr(), value));
        };
        unsafe {
            rm!(RedisModule_InfoAddSection(ctx, c"stats".as_ptr()));
        }
        field(c"acquired", stats::ACQUIRED.get());
        field(c"reentered", stats::REENTERED.get());
        field(c"busy", stats::BUSY.get());
        field(c"released", stats::RELEASED.get());
        field(c"force_released", stats::FORCE_RELEASED.get());
        field(c"renewed", stats::RENEWED.get());
        field(c"not_owner", stats::NOT_OWNER.get());
        field(c"unlock_published", stats::PUBLISHED.get());
        field(c"blocked", stats::BLOCKED.get());
        field(c"granted_after_wait", stats::GRANTED_AFTER_WAIT.get());
        field(c"timed_out", stats::TIMED_OUT.get());
        field(c"disconnected", stats::DISCONNECTED.get());
        field(c"undelivered", stats::UNDELIVERED.get());
        let (waiting, queues) = queues::totals();
        field(c"waiting", waiting as u64);
        field(c"queues", queues as u64);
        field(c"demoted", stats::DEMOTED.get());
        field(c"keepalive_renewed", stats::KEEPALIVE_RENEWED.get());
        field(c"keepalive_released", stats::KEEPALIVE_RELEASED.get());
        field(c"noreplicas", stats::NOREPLICAS.get());
        field(c"tied", ties::count() as u64);
        field(c"awaiting_replicas", acks::count() as u64);
        if let Some(warning) = eviction::warning() {
            let text = CString::new(warning.replace('\0', " ")).unwrap_or_default();
            unsafe {
                rm!(RedisModule_InfoAddSection(ctx, c"warnings".as_ptr()));
                rm!(RedisModule_InfoAddFieldCString(
                    ctx,
                    c"eviction".as_ptr(),
                    text.as_ptr()
                ));
            }
        }
    })
}
