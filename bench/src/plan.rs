//! How much of each workload a run does. `Full` is `make bench` (< 10 min
//! on 2 cores), `Quick` is `make bench-quick` (about a minute), `Smoke` is
//! the `make test` check that every table row is produced (seconds; the
//! numbers mean nothing at that size).

use std::time::Duration;

use crate::workloads::b9::Config as B9Config;
use crate::workloads::b12::Config as B12Config;
use crate::workloads::b14::Config as B14Config;
use crate::workloads::b15::Config as B15Config;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Full,
    Quick,
    Smoke,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Full => "full (`make bench`)",
            Mode::Quick => "quick (`make bench-quick`)",
            Mode::Smoke => "smoke (tiny sizes; numbers are not meaningful)",
        }
    }
}

/// The workloads, selectable with `--only`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Workload {
    B1,
    B2,
    B3,
    B4,
    B6,
    B7,
    B8,
    B9,
    B10,
    B11,
    B12,
    B13,
    B14,
    B15,
    B16,
}

impl Workload {
    pub const ALL: [Workload; 15] = [
        Workload::B1,
        Workload::B2,
        Workload::B3,
        Workload::B4,
        Workload::B6,
        Workload::B7,
        Workload::B8,
        Workload::B9,
        Workload::B10,
        Workload::B11,
        Workload::B12,
        Workload::B13,
        Workload::B14,
        Workload::B15,
        Workload::B16,
    ];

    pub fn parse(s: &str) -> Option<Workload> {
        Workload::ALL
            .into_iter()
            .find(|w| format!("{w:?}").eq_ignore_ascii_case(s))
    }
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub mode: Mode,
    /// B1: distinct keys the uncontended pairs cycle over.
    pub b1_keys: usize,
    pub b1_clients: Vec<usize>,
    pub b1_pipelines: Vec<usize>,
    /// Each row is measured in `b1_slices` slices of `b1_slice`, each after
    /// `b1_warmup`, the variants taking turns slice by slice: on a shared
    /// (virtual) machine whose speed drifts by the minute, a slow spell then
    /// hits every variant alike instead of one.
    pub b1_slices: usize,
    pub b1_warmup: Duration,
    pub b1_slice: Duration,
    /// B1 server cost per command (acquire new / re-entrant / release):
    /// keys per phase and how many interleaved rounds per variant.
    pub cost_keys: usize,
    pub cost_rounds: usize,
    /// B2: locks renewed per round, rounds per variant (interleaved).
    pub b2_keys: usize,
    pub b2_rounds: usize,
    /// B3: contenders K and hold times.
    pub b3_clients: Vec<usize>,
    pub b3_holds: Vec<Duration>,
    /// As for B1: `b3_slices` interleaved slices of `b3_slice` per row.
    pub b3_slices: usize,
    pub b3_warmup: Duration,
    pub b3_slice: Duration,
    /// B4: waiters, and (lease, trials) pairs.
    pub b4_waiters: usize,
    pub b4_leases: Vec<(Duration, usize)>,
    /// B6: locks held at once, and how long to wait for used_memory to
    /// come back to the baseline after releasing them.
    pub b6_locks: usize,
    pub b6_settle: Duration,
    /// B8: clients, and as for B1 interleaved slices per row.
    pub b8_clients: Vec<usize>,
    pub b8_slices: usize,
    pub b8_warmup: Duration,
    pub b8_slice: Duration,
    /// B8 token cost: keys per phase, rounds.
    pub b8_token_keys: usize,
    pub b8_token_rounds: usize,
    /// B7: waiters per kill; kills of the KEEPALIVE holder; (lease, kills)
    /// of the plain-lease holder and of the watchdog holder.
    pub b7_waiters: usize,
    pub b7_keepalive_kills: usize,
    pub b7_lease: (Duration, usize),
    pub b7_watchdog: (Duration, usize),
    /// B9: tied locks, their lease, probe time per phase.
    pub b9: crate::workloads::b9::Config,
    /// B10: queued keys sharing one deadline.
    pub b10: crate::workloads::b10::Config,
    /// B11: how long each client library's driver runs.
    pub b11_each: Duration,
    /// B12 overselling: stock, buyers, segments; rounds per seller
    /// (interleaved).
    pub b12: crate::workloads::b12::Config,
    pub b12_rounds: usize,
    /// B13 family server cost: keys per phase, rounds.
    pub b13_keys: usize,
    pub b13_rounds: usize,
    /// B14 writer wait under a stream of readers.
    pub b14: crate::workloads::b14::Config,
    /// B15 multi-key locks: clients, key pool, set size, hold, MultiLock
    /// budget per member; and the measured window per variant.
    pub b15: crate::workloads::b15::Config,
    pub b15_window: Duration,
    /// B16: candidates queued behind the leader; kills of the hashlock
    /// leader; (lease, kills) of the Redisson-style watchdog leader.
    pub b16_candidates: usize,
    pub b16_kills: usize,
    pub b16_watchdog: (Duration, usize),
}

impl Plan {
    pub fn for_mode(mode: Mode) -> Plan {
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        // What every mode shares: the grid, so every row exists.
        let b1_clients = vec![1, 50];
        let b1_pipelines = vec![1, 16];
        let b3_clients = vec![2, 8, 32];
        let b3_holds = vec![us(0), us(100), ms(1)];
        // The family workloads' shapes (issue 20 item 4, issue 21 item 5).
        let b12_config = B12Config {
            stock: 1000,
            buyers: 50,
            segments: 10,
        };
        let b14_config = B14Config {
            readers: 8,
            hold: ms(2),
            writes: 30,
            writer_hold: us(100),
            gap: ms(10),
            cap: ms(500),
        };
        let b15_config = B15Config {
            clients: 8,
            pool: 16,
            set: 4,
            hold: us(100),
            per_member: ms(50),
        };
        match mode {
            Mode::Full => Plan {
                mode,
                b1_keys: 100_000,
                b1_clients,
                b1_pipelines,
                b1_slices: 10,
                b1_warmup: ms(50),
                b1_slice: ms(250),
                cost_keys: 100_000,
                cost_rounds: 2,
                b2_keys: 100_000,
                b2_rounds: 3,
                b3_clients,
                b3_holds,
                b3_slices: 6,
                b3_warmup: ms(50),
                b3_slice: ms(400),
                b4_waiters: 8,
                b4_leases: vec![(ms(200), 30), (ms(2000), 8)],
                b6_locks: 1_000_000,
                b6_settle: Duration::from_secs(10),
                b8_clients: vec![1, 50],
                b8_slices: 8,
                b8_warmup: ms(50),
                b8_slice: ms(400),
                b8_token_keys: 50_000,
                b8_token_rounds: 4,
                b7_waiters: 4,
                b7_keepalive_kills: 300,
                b7_lease: (ms(200), 60),
                b7_watchdog: (ms(300), 40),
                b9: B9Config {
                    locks: 100_000,
                    lease: ms(3000),
                    window: Duration::from_secs(10),
                },
                b10: crate::workloads::b10::Config { keys: 20_000 },
                b11_each: Duration::from_secs(5),
                b12: b12_config,
                b12_rounds: 5,
                b13_keys: 20_000,
                b13_rounds: 2,
                b14: B14Config {
                    writes: 30,
                    cap: ms(500),
                    ..b14_config
                },
                b15: b15_config,
                b15_window: Duration::from_secs(3),
                b16_candidates: 2,
                b16_kills: 100,
                b16_watchdog: (ms(300), 20),
            },
            Mode::Quick => Plan {
                mode,
                b1_keys: 100_000,
                b1_clients,
                b1_pipelines,
                b1_slices: 2,
                b1_warmup: ms(80),
                b1_slice: ms(250),
                cost_keys: 20_000,
                cost_rounds: 1,
                b2_keys: 20_000,
                b2_rounds: 1,
                b3_clients,
                b3_holds,
                b3_slices: 2,
                b3_warmup: ms(50),
                b3_slice: ms(200),
                b4_waiters: 8,
                b4_leases: vec![(ms(200), 6), (ms(2000), 1)],
                b6_locks: 200_000,
                b6_settle: Duration::from_secs(5),
                b8_clients: vec![1, 50],
                b8_slices: 2,
                b8_warmup: ms(50),
                b8_slice: ms(250),
                b8_token_keys: 20_000,
                b8_token_rounds: 2,
                b7_waiters: 4,
                b7_keepalive_kills: 60,
                b7_lease: (ms(200), 15),
                b7_watchdog: (ms(300), 10),
                b9: B9Config {
                    locks: 100_000,
                    lease: ms(3000),
                    window: Duration::from_secs(4),
                },
                b10: crate::workloads::b10::Config { keys: 20_000 },
                b11_each: Duration::from_secs(2),
                b12: b12_config,
                b12_rounds: 1,
                b13_keys: 5_000,
                b13_rounds: 1,
                b14: B14Config {
                    writes: 10,
                    cap: ms(300),
                    ..b14_config
                },
                b15: b15_config,
                b15_window: Duration::from_secs(1),
                b16_candidates: 2,
                b16_kills: 100,
                b16_watchdog: (ms(300), 5),
            },
            Mode::Smoke => Plan {
                mode,
                b1_keys: 2_000,
                b1_clients,
                b1_pipelines,
                b1_slices: 1,
                b1_warmup: ms(20),
                b1_slice: ms(60),
                cost_keys: 500,
                cost_rounds: 1,
                b2_keys: 500,
                b2_rounds: 1,
                b3_clients,
                b3_holds,
                b3_slices: 1,
                b3_warmup: ms(20),
                b3_slice: ms(80),
                b4_waiters: 8,
                b4_leases: vec![(ms(200), 1), (ms(2000), 1)],
                b6_locks: 5_000,
                b6_settle: Duration::from_secs(1),
                b8_clients: vec![1, 50],
                b8_slices: 1,
                b8_warmup: ms(20),
                // One client's REPLICAS round trips have been slower than
                // 80 ms on a loaded machine, leaving the row empty.
                b8_slice: ms(250),
                b8_token_keys: 500,
                b8_token_rounds: 2,
                b7_waiters: 2,
                b7_keepalive_kills: 3,
                b7_lease: (ms(200), 2),
                b7_watchdog: (ms(300), 2),
                b9: B9Config {
                    locks: 2_000,
                    lease: ms(600),
                    window: ms(500),
                },
                b10: crate::workloads::b10::Config { keys: 500 },
                b11_each: ms(300),
                b12: B12Config {
                    stock: 100,
                    buyers: 10,
                    segments: 10,
                },
                b12_rounds: 1,
                b13_keys: 300,
                b13_rounds: 1,
                b14: B14Config {
                    readers: 4,
                    writes: 3,
                    cap: ms(100),
                    ..b14_config
                },
                b15: b15_config,
                b15_window: ms(250),
                b16_candidates: 2,
                b16_kills: 3,
                b16_watchdog: (ms(300), 1),
            },
        }
    }
}
