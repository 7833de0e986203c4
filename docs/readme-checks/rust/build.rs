//! Copies the README's redis-rs snippet, verbatim, into the body of a
//! function (`$OUT_DIR/readme_snippet.rs`), so the check compiles and runs
//! exactly what the README shows.
use std::path::Path;

fn main() {
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../README.md");
    println!("cargo::rerun-if-changed={}", readme_path.display());
    let readme = std::fs::read_to_string(&readme_path).expect("README.md");
    let start = readme.find("**Rust (redis-rs)**").expect("the redis-rs section");
    let body = &readme[start..];
    let open = body.find("```rust\n").expect("its rust block") + "```rust\n".len();
    let len = body[open..].find("```").expect("the block's end");
    let snippet = &body[open..open + len];
    let f = format!(
        "fn readme_snippet(client: &redis::Client, me: &str) -> redis::RedisResult<(Option<i64>, Option<String>)> {{\n\
         let me = me.to_string();\n{snippet}\nOk((held, job_owner))\n}}\n"
    );
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("readme_snippet.rs");
    std::fs::write(out, f).unwrap();
}
