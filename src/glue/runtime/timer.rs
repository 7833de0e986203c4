//! Module timers with a typed payload. The module keeps exactly one running
//! (the scheduler's): Redis's timer table probes for a free slot when many
//! timers fall due in the same millisecond, which made 16,000 of them cost
//! 11.5 s of server time.

use std::ffi::c_void;
use std::ptr;

use super::ffi::{Ctx, raw};
use super::firewall;

/// A running module timer whose payload is a `T`: stopping it can only
/// free the payload as the type it was started with.
pub struct Timer<T> {
    id: raw::RedisModuleTimerID,
    payload: std::marker::PhantomData<fn(T)>,
}

impl<T> Clone for Timer<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Timer<T> {}

/// Starts a module timer (an event-loop time event: millisecond precise,
/// unlike blocked-client timeouts, which lag up to 1/hz). `payload` is
/// handed to `f` when it fires, inside the panic firewall.
pub fn start<T: 'static>(ctx: Ctx, ms: i64, payload: T, f: fn(Ctx, T)) -> Timer<T> {
    unsafe extern "C" fn fire<T: 'static>(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
        // SAFETY: `data` is the box made below, handed to us exactly once.
        let boxed = unsafe { Box::from_raw(data as *mut (fn(Ctx, T), T)) };
        firewall::callback((), move || {
            let (f, payload) = *boxed;
            f(Ctx(ctx), payload)
        })
    }
    let data = Box::into_raw(Box::new((f, payload))) as *mut c_void;
    // SAFETY: a live context; Redis hands `data` back exactly once, to
    // `fire::<T>` (or to `stop`), which turns it back into the Box.
    let id = unsafe {
        rm!(RedisModule_CreateTimer(
            ctx.0,
            ms.max(0),
            Some(fire::<T>),
            data
        ))
    };
    Timer {
        id,
        payload: std::marker::PhantomData,
    }
}

/// Stops a timer that has not fired, dropping its payload.
pub fn stop<T: 'static>(ctx: Ctx, timer: Timer<T>) {
    let mut data: *mut c_void = ptr::null_mut();
    // SAFETY: a timer id we created; Redis gives its payload back in `data`.
    let stopped = unsafe { rm!(RedisModule_StopTimer(ctx.0, timer.id, &mut data)) };
    if stopped == raw::REDISMODULE_OK as std::ffi::c_int && !data.is_null() {
        // SAFETY: the timer was started by `start::<T>` and never fired.
        drop(unsafe { Box::from_raw(data as *mut (fn(Ctx, T), T)) });
    }
}
