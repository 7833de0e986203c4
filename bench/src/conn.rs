//! Connections (redis-rs, RESP2) and server-side counters from INFO.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use redis::aio::{MultiplexedConnection, PubSub};
use redis::{AsyncConnectionConfig, Value};

fn client(port: u16) -> Result<redis::Client> {
    use redis::IntoConnectionInfo;
    let info = format!("redis://127.0.0.1:{port}/")
        .into_connection_info()
        .with_context(|| format!("connection info for 127.0.0.1:{port}"))?
        // As hiredis, Jedis and Redisson (Netty) do: without it Nagle's
        // algorithm holds back a request written while the previous one is
        // unacknowledged (redis-rs leaves it off by default).
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    redis::Client::open(info).with_context(|| format!("redis client for 127.0.0.1:{port}"))
}

/// A command connection. No response timeout: `LOCK.ACQUIRE ... BLOCK`
/// legitimately waits; every workload bounds its own time instead.
pub async fn connect(port: u16) -> Result<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_response_timeout(None)
        .set_connection_timeout(Some(Duration::from_secs(5)));
    client(port)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .with_context(|| format!("connecting to 127.0.0.1:{port}"))
}

/// A RESP2 pub/sub connection (Redisson keeps these apart from commands).
pub async fn pubsub(port: u16) -> Result<PubSub> {
    client(port)?
        .get_async_pubsub()
        .await
        .with_context(|| format!("pub/sub connection to 127.0.0.1:{port}"))
}

/// Sends one command and returns its raw reply.
pub async fn call(conn: &mut MultiplexedConnection, cmd: &redis::Cmd) -> Result<Value> {
    cmd.query_async::<Value>(conn)
        .await
        .with_context(|| format!("command {}", describe(cmd)))
}

fn describe(cmd: &redis::Cmd) -> String {
    cmd.args_iter()
        .take(3)
        .map(|a| match a {
            redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            _ => "?".into(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Sends a pipeline and returns every reply.
pub async fn pipeline(conn: &mut MultiplexedConnection, p: &redis::Pipeline) -> Result<Vec<Value>> {
    p.query_async::<Vec<Value>>(conn).await.context("pipeline")
}

#[derive(Clone, Copy, Debug, Default)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
}

impl CmdStat {
    pub fn us_per_call(self) -> Option<f64> {
        (self.calls > 0).then(|| self.usec as f64 / self.calls as f64)
    }
}

/// The server's counters at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub at: Instant,
    commands: HashMap<String, CmdStat>,
    pub total_commands: u64,
    /// used_cpu_user + used_cpu_sys of the whole server process.
    pub cpu_secs: f64,
    pub used_memory: u64,
}

impl Snapshot {
    pub async fn take(conn: &mut MultiplexedConnection) -> Result<Snapshot> {
        let text: String = redis::cmd("INFO")
            .arg("commandstats")
            .arg("stats")
            .arg("cpu")
            .arg("memory")
            .query_async(conn)
            .await
            .context("INFO commandstats stats cpu memory")?;
        Snapshot::parse(&text)
    }

    fn parse(text: &str) -> Result<Snapshot> {
        let mut commands = HashMap::new();
        let mut fields = HashMap::new();
        for line in text.lines() {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            if let Some(cmd) = name.strip_prefix("cmdstat_") {
                let mut stat = CmdStat::default();
                for kv in value.split(',') {
                    match kv.split_once('=') {
                        Some(("calls", v)) => stat.calls = v.parse().unwrap_or(0),
                        Some(("usec", v)) => stat.usec = v.parse().unwrap_or(0),
                        _ => {}
                    }
                }
                commands.insert(cmd.to_ascii_lowercase(), stat);
            } else {
                fields.insert(name.to_string(), value.trim().to_string());
            }
        }
        let field = |name: &str| -> Result<&String> {
            fields
                .get(name)
                .with_context(|| format!("INFO has no field {name}"))
        };
        let num = |name: &str| -> Result<f64> {
            field(name)?
                .parse::<f64>()
                .with_context(|| format!("INFO field {name} is not a number"))
        };
        Ok(Snapshot {
            at: Instant::now(),
            commands,
            total_commands: num("total_commands_processed")? as u64,
            cpu_secs: num("used_cpu_user")? + num("used_cpu_sys")?,
            used_memory: num("used_memory")? as u64,
        })
    }

    /// What happened between `self` and `later`.
    pub fn delta(&self, later: &Snapshot) -> Delta {
        let commands = later
            .commands
            .iter()
            .map(|(name, after)| {
                let before = self.commands.get(name).copied().unwrap_or_default();
                let d = CmdStat {
                    calls: after.calls.saturating_sub(before.calls),
                    usec: after.usec.saturating_sub(before.usec),
                };
                (name.clone(), d)
            })
            .collect();
        Delta {
            commands,
            // The INFO that took `self` counts itself only in `later`.
            total_commands: later.total_commands.saturating_sub(self.total_commands + 1),
            cpu_secs: (later.cpu_secs - self.cpu_secs).max(0.0),
            elapsed: later.at.saturating_duration_since(self.at),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Delta {
    commands: HashMap<String, CmdStat>,
    pub total_commands: u64,
    pub cpu_secs: f64,
    pub elapsed: Duration,
}

impl Delta {
    /// Adds another interval's counters (slices of one measurement).
    pub fn merge(&mut self, other: &Delta) {
        for (name, stat) in &other.commands {
            let mine = self.commands.entry(name.clone()).or_default();
            mine.calls += stat.calls;
            mine.usec += stat.usec;
        }
        self.total_commands += other.total_commands;
        self.cpu_secs += other.cpu_secs;
        self.elapsed += other.elapsed;
    }

    /// The summed counters of `names` (lower-case commandstats names).
    pub fn stat(&self, names: &[&str]) -> CmdStat {
        names.iter().fold(CmdStat::default(), |acc, n| {
            let s = self.commands.get(*n).copied().unwrap_or_default();
            CmdStat {
                calls: acc.calls + s.calls,
                usec: acc.usec + s.usec,
            }
        })
    }

    /// Share of one CPU the server used over the interval.
    pub fn server_busy(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.cpu_secs / secs
        } else {
            0.0
        }
    }
}

/// Fails unless `v` is an integer equal to `want`.
pub fn expect_int(v: &Value, want: i64, what: &str) -> Result<()> {
    match v {
        Value::Int(n) if *n == want => Ok(()),
        other => bail!("{what}: expected {want}, got {other:?}"),
    }
}

/// Fails unless `v` is nil.
pub fn expect_nil(v: &Value, what: &str) -> Result<()> {
    match v {
        Value::Nil => Ok(()),
        other => bail!("{what}: expected nil, got {other:?}"),
    }
}

/// Fails unless `v` is +OK.
pub fn expect_ok(v: &Value, what: &str) -> Result<()> {
    match v {
        Value::Okay => Ok(()),
        Value::SimpleString(s) if s == "OK" => Ok(()),
        other => bail!("{what}: expected OK, got {other:?}"),
    }
}
