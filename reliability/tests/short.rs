//! The short (CI) versions of the reliability scenarios, one test each: a
//! test fails on any violation the scenario finds. `make soak` runs the long
//! versions and prints the figures.

use std::process::Command;
use std::sync::Mutex;

/// Scenarios run one at a time: each times and loads its own servers, and
/// two at once on a 2-core machine would measure each other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn run_short(scenario: &str) {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_hashlock-reliability"))
        .args([scenario, "--short"])
        .output()
        .expect("run hashlock-reliability");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "hashlock-reliability {scenario} --short failed (figures above)"
    );
}

/// R1: mutual exclusion under churn with SIGKILLed clients.
#[test]
fn churn() {
    run_short("churn");
}

/// R2: kill -9, DEBUG RELOAD, SHUTDOWN + start keep every acknowledged lock.
#[test]
fn crash() {
    run_short("crash");
}

/// R3: promotion of a replica keeps WAIT-acknowledged grants; churn across
/// promotions with REPLICAS 1 loses no grant, and tokens never go backwards.
#[test]
fn failover() {
    run_short("failover");
}

/// R4: hostile input against a live server.
#[test]
fn fuzz() {
    run_short("fuzz");
}

/// R5: memory and blocked clients back to baseline after heavy traffic.
#[test]
fn leaks() {
    run_short("leaks");
}

/// R5: MODULE UNLOAD + LOAD cycles do not grow memory.
#[test]
fn reload() {
    run_short("reload");
}

/// R6: mutual exclusion on a 3x3 cluster while slots are resharded, a
/// replica fails over and a primary is SIGKILLed.
#[test]
fn cluster() {
    run_short("cluster");
}

/// R7: semaphores under churn (SIGKILLed workers: never more than N permits
/// held, permits conserved, KEEPALIVE permits back within 50 ms) and across
/// promotions with REPLICAS 1 (no permit granted twice).
#[test]
fn semaphores() {
    run_short("semaphores");
}

/// R8: read-write locks (no writer overlaps anyone, readers only readers)
/// and multi-key locks (no partial hold ever visible, every worker makes
/// progress) under churn with SIGKILLed workers.
#[test]
fn rwmulti() {
    run_short("rwmulti");
}
