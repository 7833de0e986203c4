//! RWLOCK.INFO key (read-only: served by replicas too, where `waiters` and
//! `keepalive` are 0, both being connection state on the primary; it reads
//! the hash and the read holds' timeout keys and changes nothing)

use crate::core::LockResult;
use crate::core::command::Command;
use crate::core::rwlock;
use crate::core::rwlock::request::parse_rw_key;
use crate::glue::runtime::ffi::{Ctx, RStr};
use crate::glue::runtime::reply::Reply;
use crate::glue::store::{Mode, RwKey};
use crate::glue::waiting::{queues, ties};

pub fn run(ctx: Ctx, args: &[RStr]) -> LockResult<Reply> {
    let req = parse_rw_key(Command::RwInfo, args)?;
    let key: &[u8] = req.key.as_ref();
    let mut rw = RwKey::open(ctx, req.key, Mode::Read);
    let Some(info) = rwlock::info(&mut rw)? else {
        return Ok(Reply::Nil);
    };
    let db = ctx.db();
    let waiters = queues::len(db, key);
    let tied = info
        .owners
        .iter()
        .filter(|(owner, _, _)| ties::is_tied(db, key, owner))
        .count();
    let int = |n: usize| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
    Ok(Reply::Map(vec![
        ("mode", Reply::Bulk(info.mode.as_bytes().to_vec())),
        ("writer", info.writer.map_or(Reply::Nil, Reply::Bulk)),
        ("writeholds", Reply::Int(info.write_holds)),
        ("readers", Reply::Int(info.readers)),
        ("readholds", Reply::Int(info.read_holds)),
        ("ttl", Reply::Int(info.ttl.unwrap_or(-1))),
        ("waiters", int(waiters)),
        ("keepalive", int(tied)),
    ]))
}
