//! `LatchKey`: the latch rules' `LatchStore` over a real key (a string
//! holding the count, as RCountDownLatch stores it), through the low-level
//! key API. Writes are replicated as their effects (`SET`, `DECR`, `DEL`)
//! and announced as the keyspace events those commands fire, marked as the
//! module's own. Read-only calls (LATCH.COUNT, LATCH.AWAIT, serving the
//! queue) read the count with GET: not even the value's encoding changes.

use crate::core::latch::LatchStore;
use crate::core::lease::Millis;
use crate::core::string::StringValue;
use crate::glue::runtime::ffi::{Arg, Ctx, RStr, raw};
use crate::glue::runtime::key::{KeyKind, RawKey};
use crate::glue::store::{Mode, OwnEvent};

pub struct LatchKey<'a> {
    ctx: Ctx,
    name: &'a RStr,
    mode: Mode,
    key: RawKey,
    wrote: bool,
}

impl<'a> LatchKey<'a> {
    /// Opens the key (a logically expired key is deleted here on a
    /// primary, as any command reading or writing it would).
    pub fn open(ctx: Ctx, name: &'a RStr, mode: Mode) -> LatchKey<'a> {
        LatchKey {
            ctx,
            name,
            mode,
            key: RawKey::open(ctx, name, mode == Mode::Write),
            wrote: false,
        }
    }

    pub fn name(&self) -> &'a RStr {
        self.name
    }

    fn notify(&self, class: i32, event: &std::ffi::CStr) {
        let _own = OwnEvent::mark();
        self.ctx.notify(class, event, self.name);
    }
}

impl Drop for LatchKey<'_> {
    fn drop(&mut self) {
        if self.wrote {
            self.ctx.signal_modified(self.name);
        }
    }
}

impl LatchStore for LatchKey<'_> {
    type Value = Vec<u8>;

    fn count(&mut self) -> StringValue<Vec<u8>> {
        match self.key.kind() {
            KeyKind::Empty => StringValue::Missing,
            KeyKind::String => {
                let read = match self.mode {
                    // GET leaves the value's encoding alone; it is refused
                    // only where the module's client is redirected (a
                    // cluster replica, an importing slot).
                    Mode::Read => self.ctx.call_for_bytes(c"GET", &[self.name]).ok().flatten(),
                    Mode::Write => None,
                };
                match read.or_else(|| self.key.with_string(<[u8]>::to_vec)) {
                    Some(bytes) => StringValue::Str(bytes),
                    None => StringValue::Missing,
                }
            }
            _ => StringValue::Other,
        }
    }

    fn deadline(&mut self) -> Option<Millis> {
        self.key.deadline()
    }

    fn set_count(&mut self, count: i64) {
        self.wrote = true;
        let digits = count.to_string();
        self.key.write_string(digits.as_bytes());
        self.ctx.replicate(
            c"SET",
            &[Arg::Str(self.name), Arg::Bytes(digits.as_bytes())],
        );
        self.notify(raw::REDISMODULE_NOTIFY_STRING, c"set");
    }

    fn decrement(&mut self) {
        let Some(n) = self
            .key
            .with_string(crate::core::number::parse_i64)
            .flatten()
        else {
            return;
        };
        self.wrote = true;
        // In place: the key keeps any TTL, as DECR does.
        self.key
            .write_string(n.saturating_sub(1).to_string().as_bytes());
        self.ctx.replicate(c"DECR", &[Arg::Str(self.name)]);
        self.notify(raw::REDISMODULE_NOTIFY_STRING, c"decrby");
    }

    fn delete(&mut self) {
        self.wrote = true;
        self.key.delete();
        self.ctx.replicate(c"DEL", &[Arg::Str(self.name)]);
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
    }
}
