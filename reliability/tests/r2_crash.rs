//! The short (CI) version of `hashlock-reliability crash`: fails on any
//! violation. `make soak` runs the long version and prints the figures.

#[test]
fn crash_short() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hashlock-reliability"))
        .args(["crash", "--short"])
        .output()
        .expect("run hashlock-reliability");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "hashlock-reliability crash --short failed (figures above)"
    );
}
