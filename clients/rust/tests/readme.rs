//! The README's examples: every line is in examples/readme.rs (so they
//! compile), and that program runs against both servers.

mod common;

use std::process::Command;

use common::*;

fn readme_rust_lines() -> Vec<String> {
    let readme = include_str!("../README.md");
    let mut lines = Vec::new();
    let mut inside = false;
    for line in readme.lines() {
        match line.trim() {
            "```rust" => inside = true,
            "```" => inside = false,
            l if inside && !l.is_empty() => lines.push(l.to_string()),
            _ => {}
        }
    }
    lines
}

#[test]
fn readme_examples_are_the_compiled_example() {
    let program = include_str!("../examples/readme.rs");
    let lines = readme_rust_lines();
    assert!(lines.len() >= 10, "README rust blocks: {lines:?}");
    // Code only, whitespace collapsed (rustfmt may move comments).
    let code = |l: &str| {
        l.split(" //")
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let program: Vec<String> = program.lines().map(code).collect();
    for line in lines {
        // The program takes the server's URL and has an async ship_order.
        let line = line
            .replace("ship_order(42).await", "ship_order_async(42).await")
            .replace("\"redis://127.0.0.1:6380/\"", "url");
        let line = code(&line);
        assert!(
            line.is_empty() || line.starts_with("//") || program.contains(&line),
            "README line not in examples/readme.rs: {line}"
        );
    }
}

#[test]
fn module_feature_readme_example_runs() {
    // Uses the default options, keepalive on.
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("readme");
    assert!(
        bin.is_file(),
        "{} missing: run through `cargo test`",
        bin.display()
    );
    for kind in KINDS {
        let s = Server::start(kind);
        let out = Command::new(&bin).arg(s.port.to_string()).output().unwrap();
        assert!(
            out.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "shipped 42\ndownloaded 1\nshipped 42\n"
        );
    }
}
