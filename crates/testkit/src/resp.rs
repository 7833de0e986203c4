//! A small synchronous RESP2/RESP3 client for integration tests.
//!
//! Unlike a general-purpose client it keeps the exact reply type the server
//! sent (status vs bulk, RESP2 null bulk vs null array vs RESP3 null, map vs
//! flat array, ...) so tests can assert the wire format of module replies.
//!
//! Every I/O problem panics with the port and the last command sent: in a
//! test that is the most useful thing to do with it.

use std::fmt;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Default read timeout: a hung server fails the test instead of hanging CI.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// One reply, exactly as the server framed it.
#[derive(Clone, PartialEq)]
pub enum Reply {
    /// `+OK`
    Status(String),
    /// `-ERR ...` or RESP3 blob error `!n`: the full text including the code.
    Error(String),
    /// `:1`
    Int(i64),
    /// `$n`
    Bulk(Vec<u8>),
    /// `$-1` (RESP2 null bulk string)
    Nil,
    /// `*-1` (RESP2 null array)
    NilArray,
    /// `_` (RESP3 null)
    Null,
    /// `*n`
    Array(Vec<Reply>),
    /// `%n` (RESP3), pairs in wire order
    Map(Vec<(Reply, Reply)>),
    /// `~n` (RESP3)
    Set(Vec<Reply>),
    /// `>n` (RESP3 out-of-band data, e.g. pubsub messages)
    Push(Vec<Reply>),
    /// `,1.5` (RESP3); the text as sent, e.g. "inf" or "1.5"
    Double(String),
    /// `#t` / `#f` (RESP3)
    Bool(bool),
    /// `(123...` (RESP3); the digits as sent
    BigNumber(String),
    /// `=n` (RESP3): the 3-letter format (e.g. "txt") and the payload
    Verbatim(String, Vec<u8>),
}

// Hand-written so that bulk strings print as `Bulk(b"text")` rather than a
// list of numbers: much more readable in assert_eq! failures.
impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Status(s) => write!(f, "Status({s:?})"),
            Reply::Error(s) => write!(f, "Error({s:?})"),
            Reply::Int(i) => write!(f, "Int({i})"),
            Reply::Bulk(b) => write!(f, "Bulk(b\"{}\")", b.escape_ascii()),
            Reply::Nil => f.write_str("Nil"),
            Reply::NilArray => f.write_str("NilArray"),
            Reply::Null => f.write_str("Null"),
            Reply::Array(v) => {
                f.write_str("Array")?;
                f.debug_list().entries(v).finish()
            }
            Reply::Map(v) => {
                f.write_str("Map")?;
                f.debug_map()
                    .entries(v.iter().map(|(k, v)| (k, v)))
                    .finish()
            }
            Reply::Set(v) => {
                f.write_str("Set")?;
                f.debug_list().entries(v).finish()
            }
            Reply::Push(v) => {
                f.write_str("Push")?;
                f.debug_list().entries(v).finish()
            }
            Reply::Double(d) => write!(f, "Double({d})"),
            Reply::Bool(b) => write!(f, "Bool({b})"),
            Reply::BigNumber(n) => write!(f, "BigNumber({n})"),
            Reply::Verbatim(fmt_, b) => {
                write!(f, "Verbatim({fmt_:?}, b\"{}\")", b.escape_ascii())
            }
        }
    }
}

impl Reply {
    /// True for every flavour of null: RESP2 `$-1` and `*-1`, RESP3 `_`.
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Nil | Reply::NilArray | Reply::Null)
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// The integer of an `Int` reply; panics (showing the reply) otherwise.
    #[track_caller]
    pub fn as_int(&self) -> i64 {
        match self {
            Reply::Int(i) => *i,
            other => panic!("expected an integer reply, got {other:?}"),
        }
    }

    /// The payload of a bulk, status or verbatim reply; panics otherwise.
    #[track_caller]
    pub fn as_bytes(&self) -> &[u8] {
        match self.bytes() {
            Some(b) => b,
            None => panic!("expected a bulk/status reply, got {self:?}"),
        }
    }

    /// Like [`Reply::as_bytes`] but as UTF-8; panics if it is not UTF-8.
    #[track_caller]
    pub fn as_str(&self) -> &str {
        match std::str::from_utf8(self.as_bytes()) {
            Ok(s) => s,
            Err(e) => panic!("reply is not UTF-8 ({e}): {self:?}"),
        }
    }

    /// The elements of an array, set or push reply; panics otherwise.
    #[track_caller]
    pub fn as_array(&self) -> &[Reply] {
        match self {
            Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => v,
            other => panic!("expected an array reply, got {other:?}"),
        }
    }

    /// The first word of an error reply (`"ERR"`, `"WRONGTYPE"`, ...), or
    /// `None` if this is not an error.
    pub fn err_code(&self) -> Option<&str> {
        match self {
            Reply::Error(s) => s.split_whitespace().next(),
            _ => None,
        }
    }

    /// Looks a field up in a RESP3 map or in a RESP2 flat
    /// `[field, value, field, value, ...]` array. Fields are compared as
    /// bytes, whatever string type carries them.
    pub fn map_get(&self, field: &str) -> Option<&Reply> {
        let field = field.as_bytes();
        match self {
            Reply::Map(pairs) => pairs
                .iter()
                .find(|(k, _)| k.bytes() == Some(field))
                .map(|(_, v)| v),
            Reply::Array(flat) => flat
                .chunks_exact(2)
                .find(|kv| kv[0].bytes() == Some(field))
                .map(|kv| &kv[1]),
            _ => None,
        }
    }

    /// The payload of any string-like reply, without panicking.
    fn bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Status(s) | Reply::Error(s) | Reply::Double(s) | Reply::BigNumber(s) => {
                Some(s.as_bytes())
            }
            Reply::Bulk(b) | Reply::Verbatim(_, b) => Some(b),
            _ => None,
        }
    }
}

/// Anything that can be a command argument. Used by the [`args!`] macro so a
/// single command can mix strings, byte strings and numbers.
pub trait ToArg {
    fn to_arg(&self) -> Vec<u8>;
}

impl ToArg for str {
    fn to_arg(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl ToArg for String {
    fn to_arg(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl ToArg for [u8] {
    fn to_arg(&self) -> Vec<u8> {
        self.to_vec()
    }
}
impl<const N: usize> ToArg for [u8; N] {
    fn to_arg(&self) -> Vec<u8> {
        self.to_vec()
    }
}
impl ToArg for Vec<u8> {
    fn to_arg(&self) -> Vec<u8> {
        self.clone()
    }
}
impl<T: ToArg + ?Sized> ToArg for &T {
    fn to_arg(&self) -> Vec<u8> {
        (**self).to_arg()
    }
}
macro_rules! to_arg_display {
    ($($t:ty),*) => {$(
        impl ToArg for $t {
            fn to_arg(&self) -> Vec<u8> {
                self.to_string().into_bytes()
            }
        }
    )*};
}
to_arg_display!(i32, i64, u16, u32, u64, usize, f64);

/// Builds a `[Vec<u8>; N]` argument list from mixed types, for
/// [`Client::cmd`] / [`Client::send`]:
///
/// ```ignore
/// c.cmd(&args!["LOCK.ACQUIRE", b"k\0x", owner, "PX", 1000]);
/// ```
#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        [$($crate::resp::ToArg::to_arg(&$a)),*]
    };
}

/// What [`Client::poll_reply`] found.
#[derive(Clone, Debug, PartialEq)]
pub enum Polled {
    Reply(Reply),
    /// Nothing arrived within the time given; the connection is usable.
    Nothing,
    /// The server closed the connection (the text says how).
    Closed(String),
}

/// A synchronous connection to one server.
pub struct Client {
    port: u16,
    reader: BufReader<TcpStream>,
    timeout: Option<Duration>,
    /// Short description of the last command sent, for panic messages.
    last_cmd: String,
}

impl Client {
    /// Connects with the server's default protocol (RESP2).
    #[track_caller]
    pub fn connect(port: u16) -> Client {
        let stream = match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => s,
            Err(e) => panic!("cannot connect to 127.0.0.1:{port}: {e}"),
        };
        // Small commands are written in one write_all; Nagle would only add
        // latency to pipelined tests.
        let _ = stream.set_nodelay(true);
        let mut c = Client {
            port,
            reader: BufReader::with_capacity(64 * 1024, stream),
            timeout: None,
            last_cmd: String::from("(connect)"),
        };
        c.set_timeout(Some(DEFAULT_TIMEOUT));
        c
    }

    /// A client over a connection opened elsewhere (e.g. inherited from a
    /// parent process, which keeps its own handle on the same socket).
    pub fn from_stream(port: u16, stream: TcpStream) -> Client {
        let _ = stream.set_nodelay(true);
        let mut c = Client {
            port,
            reader: BufReader::with_capacity(64 * 1024, stream),
            timeout: None,
            last_cmd: String::from("(inherited)"),
        };
        c.set_timeout(Some(DEFAULT_TIMEOUT));
        c
    }

    /// Connects and switches to RESP3 with `HELLO 3`.
    #[track_caller]
    pub fn connect_resp3(port: u16) -> Client {
        let mut c = Client::connect(port);
        let hello = c.cmd(&["HELLO", "3"]);
        match (&hello, hello.map_get("proto")) {
            (Reply::Map(_), Some(Reply::Int(3))) => {}
            _ => panic!("HELLO 3 on port {port} did not switch to RESP3: {hello:?}"),
        }
        c
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Sets the read timeout used by [`Client::read_reply`] and
    /// [`Client::cmd`]. `None` blocks forever (avoid in tests).
    #[track_caller]
    pub fn set_timeout(&mut self, d: Option<Duration>) {
        // A zero Duration is rejected by the OS call; treat it as 1 ms.
        let d = d.map(|d| d.max(Duration::from_millis(1)));
        if let Err(e) = self.reader.get_ref().set_read_timeout(d) {
            panic!("set_read_timeout on port {}: {e}", self.port);
        }
        self.timeout = d;
    }

    /// Sends one command and reads one reply.
    #[track_caller]
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        self.send(args);
        self.read_reply()
    }

    /// Sends one command without reading the reply (pipelining, blocking
    /// commands, SUBSCRIBE, ...).
    #[track_caller]
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        self.send_pipeline(&[args]);
    }

    /// Sends several commands in one write without reading the replies: the
    /// server reads them together and runs them back to back, with no pause
    /// of this process in between (e.g. `TIME`, a command, `TIME`: the
    /// command timed on the server's clock). One reply per command follows.
    #[track_caller]
    pub fn send_pipeline<A: AsRef<[u8]>>(&mut self, cmds: &[&[A]]) {
        let size: usize = cmds
            .iter()
            .map(|args| 16 + args.iter().map(|a| a.as_ref().len() + 16).sum::<usize>())
            .sum();
        let mut buf = Vec::with_capacity(size);
        for args in cmds {
            assert!(!args.is_empty(), "empty command");
            // Always a RESP array of bulk strings: binary safe, NULs included.
            buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args.iter() {
                let a = a.as_ref();
                buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                buf.extend_from_slice(a);
                buf.extend_from_slice(b"\r\n");
            }
            self.last_cmd = describe(args);
        }
        if let Err(e) = self.reader.get_mut().write_all(&buf) {
            panic!("sending {} to port {}: {e}", self.last_cmd, self.port);
        }
    }

    /// Reads the next reply (waiting at most the configured timeout).
    #[track_caller]
    pub fn read_reply(&mut self) -> Reply {
        self.read_value()
    }

    /// Waits up to `timeout` for a reply to start arriving. Returns `None`
    /// if nothing came; the connection stays usable. Once the first byte is
    /// there the whole reply is read with the normal timeout, so a timeout
    /// can never leave a half-read reply behind.
    #[track_caller]
    pub fn try_read_reply(&mut self, timeout: Duration) -> Option<Reply> {
        if self.reader.buffer().is_empty() {
            let normal = self.timeout;
            self.set_timeout(Some(timeout));
            // fill_buf reads into the buffer without consuming anything.
            let res = self.reader.fill_buf().map(|b| b.is_empty());
            self.set_timeout(normal);
            match res {
                Ok(false) => {}
                Ok(true) => panic!(
                    "connection to port {} closed by the server (after {})",
                    self.port, self.last_cmd
                ),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return None;
                }
                Err(e) => panic!(
                    "reading from port {} (after {}): {e}",
                    self.port, self.last_cmd
                ),
            }
        }
        Some(self.read_value())
    }

    /// Like [`Client::try_read_reply`], but a connection the server closed
    /// (or reset) is an answer too, not a panic: a server may close a
    /// blocked client's connection when it stops serving its key.
    #[track_caller]
    pub fn poll_reply(&mut self, timeout: Duration) -> Polled {
        if self.reader.buffer().is_empty() {
            let normal = self.timeout;
            self.set_timeout(Some(timeout));
            let res = self.reader.fill_buf().map(|b| b.is_empty());
            self.set_timeout(normal);
            match res {
                Ok(false) => {}
                Ok(true) => return Polled::Closed("closed by the server".into()),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Polled::Nothing;
                }
                Err(e) => return Polled::Closed(e.to_string()),
            }
        }
        Polled::Reply(self.read_value())
    }

    /// Bytes already read from the socket but not yet consumed as replies
    /// (a caller polling the socket itself must check this first).
    pub fn buffered_len(&self) -> usize {
        self.reader.buffer().len()
    }

    /// The raw connection and whatever was already read from it but not
    /// consumed (e.g. to drain a replication stream without parsing it).
    pub fn into_parts(self) -> (Vec<u8>, TcpStream) {
        let buffered = self.reader.buffer().to_vec();
        (buffered, self.reader.into_inner())
    }

    /// `CLIENT ID` of this connection.
    #[track_caller]
    pub fn id(&mut self) -> i64 {
        self.cmd(&["CLIENT", "ID"]).as_int()
    }

    /// After sending `SYNC` (acting as a replica): skips the primary's
    /// keep-alive newlines and reads the RDB snapshot, which is framed as
    /// `$<len>\r\n<bytes>` with NO trailing CRLF (or, diskless, as
    /// `$EOF:<40-byte mark>\r\n<bytes><mark>`). Returns the RDB bytes; what
    /// follows on the connection is the replication stream, readable with
    /// [`Client::read_reply`] / [`Client::try_read_reply`].
    #[track_caller]
    pub fn read_sync_payload(&mut self) -> Vec<u8> {
        // Keep-alives: a bare "\n" every second while the primary saves.
        loop {
            let next = match self.reader.fill_buf() {
                Ok([]) => panic!("connection to port {} closed during SYNC", self.port),
                Ok(buf) => buf[0],
                Err(e) => self.io_panic(e),
            };
            if next != b'\n' {
                break;
            }
            self.reader.consume(1);
        }
        let line = self.read_line();
        let Some(spec) = line.strip_prefix(b"$") else {
            panic!(
                "SYNC on port {}: expected `$<len>`, got {:?}",
                self.port,
                line.escape_ascii().to_string()
            );
        };
        if let Some(mark) = spec.strip_prefix(b"EOF:") {
            // Diskless transfer: read until the payload ends with the mark.
            let mut rdb = Vec::new();
            let mut byte = [0u8; 1];
            while !rdb.ends_with(mark) {
                if let Err(e) = self.reader.read_exact(&mut byte) {
                    self.io_panic(e);
                }
                rdb.push(byte[0]);
            }
            rdb.truncate(rdb.len() - mark.len());
            return rdb;
        }
        let len = self.parse_num(spec);
        let mut rdb = vec![0; self.len(len)];
        if let Err(e) = self.reader.read_exact(&mut rdb) {
            self.io_panic(e);
        }
        rdb
    }

    // ---- parser ----

    /// One CRLF-terminated line, without the CRLF.
    #[track_caller]
    fn read_line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        match self.reader.read_until(b'\n', &mut line) {
            Ok(0) => panic!(
                "connection to port {} closed by the server (waiting for reply to {})",
                self.port, self.last_cmd
            ),
            Ok(_) => {}
            Err(e) => self.io_panic(e),
        }
        if !line.ends_with(b"\r\n") {
            panic!(
                "protocol error from port {}: line not CRLF-terminated: {:?}",
                self.port,
                line.escape_ascii().to_string()
            );
        }
        line.truncate(line.len() - 2);
        line
    }

    #[track_caller]
    fn read_exact_crlf(&mut self, len: usize) -> Vec<u8> {
        let mut buf = vec![0; len + 2];
        if let Err(e) = self.reader.read_exact(&mut buf) {
            self.io_panic(e);
        }
        if !buf.ends_with(b"\r\n") {
            panic!(
                "protocol error from port {}: bulk of {len} bytes not followed by CRLF",
                self.port
            );
        }
        buf.truncate(len);
        buf
    }

    #[track_caller]
    fn io_panic(&self, e: std::io::Error) -> ! {
        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            panic!(
                "timed out after {:?} waiting for a reply to {} from port {}",
                self.timeout.unwrap_or_default(),
                self.last_cmd,
                self.port
            );
        }
        panic!(
            "reading reply to {} from port {}: {e}",
            self.last_cmd, self.port
        )
    }

    #[track_caller]
    fn read_value(&mut self) -> Reply {
        loop {
            let line = self.read_line();
            let Some((&tag, rest)) = line.split_first() else {
                panic!("protocol error from port {}: empty line", self.port);
            };
            let text = || String::from_utf8_lossy(rest).into_owned();
            return match tag {
                b'+' => Reply::Status(text()),
                b'-' => Reply::Error(text()),
                b':' => Reply::Int(self.parse_num(rest)),
                b'$' => match self.parse_num(rest) {
                    -1 => Reply::Nil,
                    n => Reply::Bulk(self.read_exact_crlf(self.len(n))),
                },
                b'*' => match self.parse_num(rest) {
                    -1 => Reply::NilArray,
                    n => Reply::Array(self.read_n(n)),
                },
                b'_' => Reply::Null,
                b',' => Reply::Double(text()),
                b'#' => match rest {
                    b"t" => Reply::Bool(true),
                    b"f" => Reply::Bool(false),
                    _ => panic!(
                        "protocol error from port {}: bad boolean {}",
                        self.port,
                        text()
                    ),
                },
                b'(' => Reply::BigNumber(text()),
                b'!' => {
                    let n = self.parse_num(rest);
                    let body = self.read_exact_crlf(self.len(n));
                    Reply::Error(String::from_utf8_lossy(&body).into_owned())
                }
                b'=' => {
                    let n = self.parse_num(rest);
                    let body = self.read_exact_crlf(self.len(n));
                    // "txt:payload": a 3-byte format, a colon, the payload.
                    if body.len() < 4 || body[3] != b':' {
                        panic!(
                            "protocol error from port {}: bad verbatim string",
                            self.port
                        );
                    }
                    Reply::Verbatim(
                        String::from_utf8_lossy(&body[..3]).into_owned(),
                        body[4..].to_vec(),
                    )
                }
                b'%' => {
                    let n = self.parse_num(rest);
                    let mut pairs = Vec::with_capacity(self.len(n).min(1024));
                    for _ in 0..n {
                        let k = self.read_value();
                        let v = self.read_value();
                        pairs.push((k, v));
                    }
                    Reply::Map(pairs)
                }
                b'~' => Reply::Set(self.read_n(self.parse_num(rest))),
                b'>' => Reply::Push(self.read_n(self.parse_num(rest))),
                b'|' => {
                    // Attribute: metadata preceding the real reply. Read and
                    // drop it, then read the reply it annotates.
                    for _ in 0..self.parse_num(rest) * 2 {
                        self.read_value();
                    }
                    continue;
                }
                _ => panic!(
                    "protocol error from port {}: unknown reply type {:?}",
                    self.port,
                    line.escape_ascii().to_string()
                ),
            };
        }
    }

    #[track_caller]
    fn read_n(&mut self, n: i64) -> Vec<Reply> {
        let n = self.len(n);
        // Cap the pre-allocation: the count comes from the wire.
        let mut v = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            v.push(self.read_value());
        }
        v
    }

    #[track_caller]
    fn parse_num(&self, s: &[u8]) -> i64 {
        match std::str::from_utf8(s).ok().and_then(|s| s.parse().ok()) {
            Some(n) => n,
            None => panic!(
                "protocol error from port {}: bad number {:?}",
                self.port,
                s.escape_ascii().to_string()
            ),
        }
    }

    #[track_caller]
    fn len(&self, n: i64) -> usize {
        match usize::try_from(n) {
            Ok(n) => n,
            Err(_) => panic!("protocol error from port {}: bad length {n}", self.port),
        }
    }
}

/// First few arguments of a command, lossily, for messages.
fn describe<A: AsRef<[u8]>>(args: &[A]) -> String {
    let mut s = String::new();
    for (i, a) in args.iter().take(6).enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let a = a.as_ref();
        let shown = &a[..a.len().min(40)];
        s.push_str(&shown.escape_ascii().to_string());
        if a.len() > 40 {
            s.push_str("...");
        }
    }
    if args.len() > 6 {
        s.push_str(" ...");
    }
    s
}
