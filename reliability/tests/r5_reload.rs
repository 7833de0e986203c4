//! The short (CI) version of `hashlock-reliability reload`: used_memory must
//! not grow across MODULE UNLOAD + LOAD cycles.

#[test]
fn reload_short() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hashlock-reliability"))
        .args(["reload", "--short"])
        .output()
        .expect("run hashlock-reliability");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "hashlock-reliability reload --short failed (figures above)"
    );
}
