//! Argument docs for `COMMAND DOCS`, which redis-cli turns into hints:
//! `LOCK.ACQUIRE key owner [PX milliseconds|EX seconds] [BLOCK timeout]`.

use std::ffi::CStr;

use super::super::ffi::raw::{self, RedisModuleCommandArg as Arg};
use crate::core::request::Command;

const KEY: raw::RedisModuleCommandArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY;
const STRING: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING;
const INTEGER: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER;
const ONEOF: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF;
const OPTIONAL: i32 = raw::REDISMODULE_CMD_ARG_OPTIONAL as i32;

/// A command's argument list (zero-terminated, as Redis reads it), with the
/// `PX|EX` alternatives it points into. Redis copies it at registration.
pub struct ArgDocs {
    _lease: Box<[Arg; 3]>,
    args: Vec<Arg>,
}

impl ArgDocs {
    pub fn as_mut_ptr(&mut self) -> *mut Arg {
        self.args.as_mut_ptr()
    }
}

fn arg(name: &'static CStr, type_: raw::RedisModuleCommandArgType) -> Arg {
    // SAFETY: a plain C struct; all-zero is "no token, no flags, no subargs".
    let mut a: Arg = unsafe { std::mem::zeroed() };
    a.name = name.as_ptr();
    a.type_ = type_;
    a.key_spec_index = if type_ == KEY { 0 } else { -1 };
    a
}

fn token(name: &'static CStr, token: &'static CStr, type_: raw::RedisModuleCommandArgType) -> Arg {
    let mut a = arg(name, type_);
    a.token = token.as_ptr();
    a
}

fn end() -> Arg {
    // SAFETY: the all-zero entry ends an argument list.
    unsafe { std::mem::zeroed() }
}

pub fn for_command(command: Command) -> ArgDocs {
    let mut lease = Box::new([
        token(c"milliseconds", c"PX", INTEGER),
        token(c"seconds", c"EX", INTEGER),
        end(),
    ]);
    let mut lease_arg = arg(c"lease", ONEOF);
    lease_arg.flags = OPTIONAL;
    lease_arg.subargs = lease.as_mut_ptr();
    let mut block = token(c"timeout", c"BLOCK", INTEGER);
    block.flags = OPTIONAL;
    let key = arg(c"key", KEY);
    let owner = arg(c"owner", STRING);
    let args = match command {
        Command::Acquire => vec![key, owner, lease_arg, block, end()],
        Command::Renew => vec![key, owner, lease_arg, end()],
        Command::Release => vec![key, owner, end()],
        Command::Info | Command::ForceRelease => vec![key, end()],
    };
    debug_assert!(args.last().is_some_and(|a| a.name.is_null()));
    ArgDocs {
        _lease: lease,
        args,
    }
}
