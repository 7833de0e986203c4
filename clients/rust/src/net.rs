//! The sync side's own connection: RESP2 over a `TcpStream` or a Unix
//! socket, commands packed by redis-rs and replies parsed by its parser.
//!
//! Why not `redis::Connection`: loss detection must see an idle connection
//! end the moment the server closes it (a KEEPALIVE lock is tied to it), and
//! `redis::Connection` gives no access to its socket. This one exposes its
//! file descriptor for `poll`, lets a waiting call have a read timeout of its
//! own, and never retries or reconnects.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::Duration;

use redis::{Cmd, ConnectionAddr, ConnectionInfo, RedisError, Value};

use crate::error::{Error, Result};

/// Where a node is (a key of the pools).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Address {
    Tcp(String, u16),
    Unix(std::path::PathBuf),
}

impl Address {
    /// The address of `info`, or an error for TLS (not supported by the
    /// library's own connections).
    pub fn of(info: &ConnectionInfo) -> Result<Address> {
        match info.addr() {
            ConnectionAddr::Tcp(h, p) => Ok(Address::Tcp(h.clone(), *p)),
            ConnectionAddr::Unix(p) => Ok(Address::Unix(p.clone())),
            _ => Err(Error::Redis(RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "hashlock-client: TLS connections are not supported",
            )))),
        }
    }

    /// `info` pointing at this address instead.
    pub fn apply(&self, info: &ConnectionInfo) -> ConnectionInfo {
        let addr = match self {
            Address::Tcp(h, p) => ConnectionAddr::Tcp(h.clone(), *p),
            Address::Unix(p) => ConnectionAddr::Unix(p.clone()),
        };
        info.clone().set_addr(addr)
    }

    /// "host:port" of a MOVED/ASK reply.
    pub fn parse(hostport: &str) -> Option<Address> {
        let (h, p) = hostport.rsplit_once(':')?;
        Some(Address::Tcp(h.to_string(), p.parse().ok()?))
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Tcp(h, p) => write!(f, "{h}:{p}"),
            Address::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

impl Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }
    fn set_write_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(t),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_write_timeout(t),
        }
    }
    fn fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            #[cfg(unix)]
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            #[cfg(unix)]
            Stream::Unix(s) => s.flush(),
        }
    }
}

/// One connection to one node.
pub struct Conn {
    reader: BufReader<Stream>,
    parser: redis::Parser,
    /// False once a call failed on the connection itself (it must not be
    /// reused: a reply may be pending).
    healthy: bool,
}

const IO_TIMEOUT: Duration = Duration::from_secs(5);

fn io_error(e: std::io::Error) -> Error {
    Error::Redis(RedisError::from(e))
}

impl Conn {
    /// Connects to `address` with `info`'s credentials and database.
    pub fn connect(info: &ConnectionInfo, address: &Address, timeout: Duration) -> Result<Conn> {
        let stream = match address {
            Address::Tcp(host, port) => {
                use std::net::ToSocketAddrs;
                let mut last = None;
                let mut connected = None;
                for addr in (host.as_str(), *port).to_socket_addrs().map_err(io_error)? {
                    match TcpStream::connect_timeout(&addr, timeout) {
                        Ok(s) => {
                            connected = Some(s);
                            break;
                        }
                        Err(e) => last = Some(e),
                    }
                }
                let s = connected.ok_or_else(|| {
                    io_error(last.unwrap_or_else(|| std::io::Error::other("no address")))
                })?;
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }
            #[cfg(unix)]
            Address::Unix(path) => Stream::Unix(UnixStream::connect(path).map_err(io_error)?),
            #[cfg(not(unix))]
            Address::Unix(_) => unreachable!(),
        };
        stream
            .set_write_timeout(Some(IO_TIMEOUT))
            .map_err(io_error)?;
        let mut conn = Conn {
            reader: BufReader::new(stream),
            parser: redis::Parser::new(),
            healthy: true,
        };
        let settings = info.redis_settings();
        if let Some(password) = settings.password() {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = settings.username() {
                auth.arg(user);
            }
            auth.arg(password);
            conn.call(&auth, Some(timeout))?;
        }
        if settings.db() != 0 {
            conn.call(redis::cmd("SELECT").arg(settings.db()), Some(timeout))?;
        }
        Ok(conn)
    }

    /// Sends `cmd` and reads its reply within `timeout` (None: no limit). A
    /// server error comes back as `Err` (MOVED/ASK included); a failure of
    /// the connection itself marks it unhealthy.
    pub fn call(&mut self, cmd: &Cmd, timeout: Option<Duration>) -> Result<Value> {
        self.send(cmd)?;
        self.read(timeout)
    }

    /// Sends `cmd` without reading its reply.
    pub fn send(&mut self, cmd: &Cmd) -> Result<()> {
        let packed = cmd.get_packed_command();
        let stream = self.reader.get_mut();
        if let Err(e) = stream.write_all(&packed) {
            self.healthy = false;
            return Err(io_error(e));
        }
        Ok(())
    }

    /// Reads one reply.
    pub fn read(&mut self, timeout: Option<Duration>) -> Result<Value> {
        if let Err(e) = self.reader.get_ref().set_read_timeout(timeout) {
            self.healthy = false;
            return Err(io_error(e));
        }
        match self.parser.parse_value(&mut self.reader) {
            Ok(v) => v.extract_error().map_err(Error::from),
            Err(e) => {
                if e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_unrecoverable_error()
                {
                    self.healthy = false;
                }
                Err(Error::from(e))
            }
        }
    }

    /// True once a reply (or a pushed message) can be read without
    /// blocking, waiting up to `timeout_ms`.
    pub fn wait_readable(&self, timeout_ms: i32) -> bool {
        !self.reader.buffer().is_empty() || readable(self.fd(), timeout_ms)
    }

    /// True while no call on it failed on the connection itself.
    pub fn healthy(&self) -> bool {
        self.healthy
    }

    pub fn fd(&self) -> RawFd {
        self.reader.get_ref().fd()
    }

    /// An idle connection still usable: nothing to read (a server that closed
    /// it, or wrote an error before closing it, makes it readable).
    pub fn idle_and_open(&self) -> bool {
        self.healthy && self.reader.buffer().is_empty() && !readable(self.fd(), 0)
    }
}

/// `poll` for readability, `timeout_ms` (0: just look).
pub fn readable(fd: RawFd, timeout_ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    n != 0
}
