//! Argument docs for `COMMAND DOCS`, which redis-cli turns into hints
//! (`LOCK.ACQUIRE key owner [PX milliseconds|EX seconds] [BLOCK timeout]
//! [KEEPALIVE] [TOKEN] [REPLICAS numreplicas timeout]`), built from the
//! options the command table lists.

use std::ffi::CStr;

use crate::core::command::{CommandSpec, Opt};
use crate::glue::runtime::ffi::raw::{self, RedisModuleCommandArg as Arg};

type ArgType = raw::RedisModuleCommandArgType;
const KEY: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY;
const STRING: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING;
const INTEGER: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER;
const ONEOF: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF;
const BLOCK: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK;
const PURE_TOKEN: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN;
const OPTIONAL: i32 = raw::REDISMODULE_CMD_ARG_OPTIONAL as i32;

/// A command's argument list (zero-terminated, as Redis reads it), with the
/// sub-argument lists it points into. Redis copies it at registration.
pub struct ArgDocs {
    _subargs: Vec<Box<[Arg]>>,
    args: Vec<Arg>,
}

impl ArgDocs {
    pub fn as_mut_ptr(&mut self) -> *mut Arg {
        self.args.as_mut_ptr()
    }
}

fn arg(name: &'static CStr, type_: ArgType) -> Arg {
    // SAFETY: a plain C struct; all-zero is "no token, no flags, no subargs".
    let mut a: Arg = unsafe { std::mem::zeroed() };
    a.name = name.as_ptr();
    a.type_ = type_;
    a.key_spec_index = if type_ == KEY { 0 } else { -1 };
    a
}

fn token(name: &'static CStr, token: &'static CStr, type_: ArgType) -> Arg {
    let mut a = arg(name, type_);
    a.token = token.as_ptr();
    a
}

fn optional(mut a: Arg) -> Arg {
    a.flags = OPTIONAL;
    a
}

fn end() -> Arg {
    // SAFETY: the all-zero entry ends an argument list.
    unsafe { std::mem::zeroed() }
}

pub fn for_command(spec: &CommandSpec) -> ArgDocs {
    let mut subargs: Vec<Box<[Arg]>> = Vec::new();
    let mut with_subargs = |mut a: Arg, list: Vec<Arg>| {
        let mut list = list.into_boxed_slice();
        a.subargs = list.as_mut_ptr();
        subargs.push(list);
        a
    };
    let mut args = vec![arg(c"key", KEY)];
    if spec.takes_owner {
        args.push(arg(c"owner", STRING));
    }
    for opt in spec.options {
        args.push(optional(match opt {
            Opt::Lease => with_subargs(
                arg(c"lease", ONEOF),
                vec![
                    token(c"milliseconds", c"PX", INTEGER),
                    token(c"seconds", c"EX", INTEGER),
                    end(),
                ],
            ),
            Opt::Block => token(c"timeout", c"BLOCK", INTEGER),
            Opt::KeepAlive => token(c"keepalive", c"KEEPALIVE", PURE_TOKEN),
            Opt::Token => token(c"token", c"TOKEN", PURE_TOKEN),
            Opt::Replicas => with_subargs(
                token(c"replicas", c"REPLICAS", BLOCK),
                vec![
                    arg(c"numreplicas", INTEGER),
                    arg(c"timeout", INTEGER),
                    end(),
                ],
            ),
        }));
    }
    args.push(end());
    ArgDocs {
        _subargs: subargs,
        args,
    }
}
