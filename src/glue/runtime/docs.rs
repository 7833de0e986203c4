//! Argument docs for `COMMAND DOCS`, which redis-cli turns into hints
//! (`LOCK.ACQUIRE key owner [PX milliseconds|EX seconds] [BLOCK timeout]
//! [KEEPALIVE] [TOKEN] [REPLICAS numreplicas timeout]`), built from the
//! options the command table lists.

use std::ffi::{CStr, CString};

use crate::core::command::{ArgKind, CommandSpec, Keys, Opt};
use crate::glue::runtime::ffi::raw::{self, RedisModuleCommandArg as Arg};

type ArgType = raw::RedisModuleCommandArgType;
const KEY: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY;
const STRING: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING;
const INTEGER: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER;
const ONEOF: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF;
const BLOCK: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK;
const PURE_TOKEN: ArgType = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN;
const OPTIONAL: i32 = raw::REDISMODULE_CMD_ARG_OPTIONAL as i32;
const MULTIPLE: i32 = raw::REDISMODULE_CMD_ARG_MULTIPLE as i32;

/// A command's argument list (zero-terminated, as Redis reads it), with the
/// sub-argument lists it points into. Redis copies it at registration.
pub struct ArgDocs {
    _subargs: Vec<Box<[Arg]>>,
    /// Names from the command table, as C strings.
    _names: Vec<CString>,
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
    let mut names: Vec<CString> = Vec::new();
    let mut with_subargs = |mut a: Arg, list: Vec<Arg>| {
        let mut list = list.into_boxed_slice();
        a.subargs = list.as_mut_ptr();
        subargs.push(list);
        a
    };
    let mut args = Vec::new();
    let numkeys = spec.command.keys() == Keys::NumKeys;
    if !numkeys {
        args.push(arg(c"key", KEY));
    }
    for fixed in spec.fixed {
        let name = CString::new(fixed.name).unwrap_or_default();
        let kind = match fixed.kind {
            ArgKind::Integer => INTEGER,
            ArgKind::String if numkeys && fixed.name == "key" => KEY,
            ArgKind::String => STRING,
        };
        let mut a = arg_owned(&name, kind);
        if fixed.multiple {
            a.flags |= MULTIPLE;
        }
        names.push(name);
        args.push(a);
    }
    let required = spec.command.required();
    for opt in spec.options {
        let doc = match opt {
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
            Opt::Count => token(c"count", c"COUNT", INTEGER),
            Opt::Mode => with_subargs(
                arg(c"mode", ONEOF),
                vec![
                    token(c"read", c"READ", PURE_TOKEN),
                    token(c"write", c"WRITE", PURE_TOKEN),
                    end(),
                ],
            ),
        };
        args.push(if required.contains(opt) {
            doc
        } else {
            optional(doc)
        });
    }
    args.push(end());
    ArgDocs {
        _subargs: subargs,
        _names: names,
        args,
    }
}

/// An argument named by a string of the command table (kept alive by the
/// `ArgDocs` it goes into).
fn arg_owned(name: &CStr, type_: ArgType) -> Arg {
    // SAFETY: a plain C struct; all-zero is "no token, no flags, no subargs".
    let mut a: Arg = unsafe { std::mem::zeroed() };
    a.name = name.as_ptr();
    a.type_ = type_;
    a.key_spec_index = if type_ == KEY { 0 } else { -1 };
    a
}
