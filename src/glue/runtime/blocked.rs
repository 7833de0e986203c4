//! Blocked clients: the raw blocking API behind a safe handle, and the four
//! callbacks Redis makes for a blocked client, each behind the panic
//! firewall, handed to safe functions of the layer that owns the client's
//! private data (`BlockedData`).
//!
//! Clients are blocked on a key (`RedisModule_BlockClientOnKeys`), never
//! woken by it (the reply callback declines: the module answers clients
//! itself): it is what makes the server redirect a waiter with `MOVED` when
//! the key's slot leaves the node, and on Valkey on failover. Unblocking
//! such a client makes the server call the timeout callback (at once on
//! 7.0, with the private data given at block time), which sends the answer.

use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::ptr::NonNull;

use super::ffi::{Ctx, RStr, raw};
use super::firewall;

/// The private data a blocked client carries, and what its callbacks do.
pub trait BlockedData: Sized + 'static {
    /// The module unblocked the client, or `CLIENT UNBLOCK ... TIMEOUT`:
    /// send the answer (through `reply`).
    fn timeout(ctx: Ctx, data: &Self);
    /// The client closed, was killed, got `CLIENT UNBLOCK ... ERROR`, a
    /// cluster redirect or a role-change error.
    fn disconnected(ctx: Ctx, data: &Self);
    /// The last word: the data is given back. `client_gone`: the server
    /// reports the client no longer blocked-and-connected.
    fn freed(ctx: Ctx, data: Box<Self>, client_gone: bool);
}

/// A blocked client and its private data. Not `Drop`: the owner decides
/// whether to `unblock` it or `forget` it (the server ended the block).
pub struct BlockedClient<T: BlockedData> {
    bc: NonNull<raw::RedisModuleBlockedClient>,
    /// Owned by Redis from `block_on_key` on; freed through `T::freed`,
    /// which Redis calls only after the client was unblocked: valid while
    /// this handle lives.
    data: NonNull<T>,
    _owns: PhantomData<T>,
}

impl<T: BlockedData> BlockedClient<T> {
    /// Blocks the client running `ctx` on `key`, with no server timeout
    /// (BLOCK times are the module's scheduler's: Redis checks blocked
    /// clients' timeouts only every 1/hz). The caller has checked that the
    /// client can block (not in MULTI/EXEC or a script).
    pub fn block_on_key(ctx: Ctx, key: &RStr, data: T) -> Option<BlockedClient<T>> {
        let data = Box::into_raw(Box::new(data));
        let mut keys = [key.ptr()];
        // SAFETY: a live context able to block, one valid key; the callbacks
        // match the API's signatures; Redis keeps `data` until it calls
        // `free::<T>`, which turns it back into the Box made here.
        let bc = unsafe {
            rm!(RedisModule_BlockClientOnKeys(
                ctx.0,
                Some(key_ready),
                Some(timeout::<T>),
                Some(free::<T>),
                0,
                keys.as_mut_ptr(),
                1,
                data as *mut c_void
            ))
        };
        let (Some(bc), Some(data)) = (NonNull::new(bc), NonNull::new(data)) else {
            // SAFETY: Redis did not block the client, so it did not take `data`.
            drop(unsafe { Box::from_raw(data) });
            return None;
        };
        // SAFETY: a handle just returned by BlockClientOnKeys.
        unsafe {
            rm!(RedisModule_SetDisconnectCallback(
                bc.as_ptr(),
                Some(disconnect::<T>)
            ))
        };
        Some(BlockedClient {
            bc,
            data,
            _owns: PhantomData,
        })
    }

    pub fn data(&self) -> &T {
        // SAFETY: see the field: valid while the handle lives; only shared
        // references are ever made to it.
        unsafe { self.data.as_ref() }
    }

    /// Unblocks the client: Redis calls `T::timeout` (at once, or before the
    /// client is next served), which sends the answer the data holds.
    pub fn unblock(self) {
        // SAFETY: a handle not yet unblocked (this consumes it).
        unsafe {
            rm!(RedisModule_UnblockClient(
                self.bc.as_ptr(),
                std::ptr::null_mut()
            ))
        };
    }

    /// The server ended the block itself: drop the handle without
    /// unblocking again.
    pub fn forget(self) {}
}

/// The private data of the client a callback runs for.
fn data_of<'a, T>(ctx: Ctx) -> Option<&'a T> {
    // SAFETY: every client we block carries a `T` of the callback's own
    // instantiation, freed only in `free::<T>` after the last callback that
    // can see it.
    unsafe { (rm!(RedisModule_GetBlockedClientPrivateData(ctx.0)) as *const T).as_ref() }
}

/// A key the client waits on was signalled ready by someone else: decline
/// (the module hands things over itself).
unsafe extern "C" fn key_ready(
    _ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let declined = raw::REDISMODULE_ERR as c_int;
    firewall::callback(declined, || declined)
}

unsafe extern "C" fn timeout<T: BlockedData>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Ctx(ctx);
    firewall::callback((), || {
        if let Some(data) = data_of::<T>(ctx) {
            T::timeout(ctx, data);
        }
    });
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn disconnect<T: BlockedData>(
    ctx: *mut raw::RedisModuleCtx,
    _bc: *mut raw::RedisModuleBlockedClient,
) {
    let ctx = Ctx(ctx);
    firewall::callback((), || {
        if let Some(data) = data_of::<T>(ctx) {
            T::disconnected(ctx, data);
        }
    })
}

unsafe extern "C" fn free<T: BlockedData>(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: the Box `block_on_key` gave Redis, handed back exactly once.
    let data = unsafe { Box::from_raw(data as *mut T) };
    let ctx = Ctx(ctx);
    firewall::callback((), move || {
        // SAFETY: the free callback's own context.
        let gone = unsafe { rm!(RedisModule_BlockedClientDisconnected(ctx.0)) } != 0;
        T::freed(ctx, data, gone);
    })
}
