//! The glue's layering holds (docs/DESIGN.md): every file under src/glue
//! refers only to modules in its own layer or below, and within the
//! `store` and `waiting` layers only to files below it in their own order.
//! Read from the source, so a new import that points up fails here.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Top-level glue modules by layer.
fn layer(module: &str) -> Option<u32> {
    Some(match module {
        "runtime" => 0,
        "store" | "config" | "stats" | "eviction" => 1,
        "scheduler" => 2,
        "waiting" => 3,
        "commands" | "events" | "jobs" | "info" => 4,
        "module" => 5,
        _ => return None,
    })
}

/// The order inside a layer's folder: a file may use files of a lower rank.
fn rank(folder: &str, file: &str) -> u32 {
    match (folder, file) {
        ("runtime", "ffi") => 0,
        ("runtime", "firewall") => 1,
        ("runtime", "register") => 3,
        ("runtime", _) => 2,
        ("store", "ids" | "queue_key" | "own_event" | "server" | "token") => 0,
        ("store", _) => 1,
        ("waiting", "slot" | "ties" | "holds") => 0,
        ("waiting", "delivery") => 1,
        ("waiting", "handle") => 2,
        ("waiting", "queues" | "acks") => 3,
        ("waiting", "serve") => 5,
        ("waiting", _) => 4,
        ("commands", "call") => 0,
        ("commands", _) => 1,
        _ => 0,
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/glue") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` with every grouped import written out: `a::{b, c::{d, e}}`
/// becomes `a::b, a::c::d, a::c::e` (innermost groups first).
fn expand_groups(text: &str) -> String {
    let mut text = text.to_string();
    while let Some(open) = text.find("::{") {
        // The innermost group: no `{` between its opening and its closing.
        let Some(close_rel) = text[open + 3..].find('}') else {
            break;
        };
        let close = open + 3 + close_rel;
        if let Some(inner) = text[open + 3..close].rfind("::{") {
            // A nested group comes first: restart from it.
            let open = open + 3 + inner;
            let close = open + 3 + text[open + 3..].find('}').unwrap_or(0);
            text = expand_one(&text, open, close);
            continue;
        }
        text = expand_one(&text, open, close);
    }
    text
}

/// Expands the group `prefix::{items}` whose `::{` is at `open` and `}` at `close`.
fn expand_one(text: &str, open: usize, close: usize) -> String {
    let start = text[..open]
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .map_or(0, |i| i + 1);
    let prefix = &text[start..open];
    let items: Vec<String> = text[open + 3..close]
        .split(',')
        .map(|item| item.split_whitespace().next().unwrap_or("").to_string())
        .filter(|item| !item.is_empty())
        .map(|item| {
            if item == "self" {
                prefix.to_string()
            } else {
                format!("{prefix}::{item}")
            }
        })
        .collect();
    format!(
        "{}{}{}",
        &text[..start],
        items.join(", "),
        &text[close + 1..]
    )
}

/// Every `crate::glue::a::b` or `super::...` path in `text`, resolved to
/// (top-level module, file in it) as far as the path says.
fn references(text: &str, here: &[String]) -> BTreeSet<(String, Option<String>)> {
    let text = expand_groups(text);
    let mut refs = BTreeSet::new();
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.contains("::"))
        .collect();
    for w in words {
        let parts: Vec<&str> = w.split("::").filter(|p| !p.is_empty()).collect();
        let path: Vec<String> = if parts.starts_with(&["crate", "glue"]) {
            parts[2..].iter().map(|s| s.to_string()).collect()
        } else if parts.first() == Some(&"super") {
            // Relative to this file's module path.
            let ups = parts.iter().take_while(|p| **p == "super").count();
            let mut base: Vec<String> = here.to_vec();
            for _ in 0..ups {
                base.pop();
            }
            base.extend(parts[ups..].iter().map(|s| s.to_string()));
            base
        } else {
            continue;
        };
        if let Some(top) = path.first() {
            refs.insert((top.clone(), path.get(1).cloned()));
        }
    }
    refs
}

#[test]
fn glue_imports_only_point_down() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/glue");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    // Files that exist, as (folder, file): a path naming anything else is an
    // item (a re-export, a function of the same file), not a file.
    let known: BTreeSet<(String, String)> = files
        .iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(&root).ok()?.with_extension("");
            let mut parts = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned());
            Some((parts.next()?, parts.next()?))
        })
        .collect();
    let mut violations = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&root).expect("under src/glue");
        let mut module: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.last().is_some_and(|m| m == "mod") {
            module.pop();
        }
        let Some(top) = module.first().cloned() else {
            continue; // glue/mod.rs itself: the layer list
        };
        let Some(my_layer) = layer(&top) else {
            violations.push(format!("{}: module {top} has no layer", rel.display()));
            continue;
        };
        let my_file = module.get(1).cloned();
        let text = fs::read_to_string(file).expect("read");
        // `super::` in a file `a/b.rs` is relative to module `a`.
        let here: Vec<String> = module.clone();
        for (target, target_file) in references(&text, &here) {
            let Some(their_layer) = layer(&target) else {
                continue; // a local item (`super::tests`, ...)
            };
            if their_layer > my_layer {
                violations.push(format!(
                    "{} (layer {my_layer}) uses {target} (layer {their_layer})",
                    rel.display()
                ));
            } else if their_layer == my_layer
                && target == top
                && let (Some(mine), Some(theirs)) = (&my_file, &target_file)
            {
                let is_file = known.contains(&(top.clone(), theirs.clone()));
                if is_file && mine != theirs && rank(&top, theirs) >= rank(&top, mine) {
                    violations.push(format!(
                        "{} uses {top}::{theirs}, not below it in {top}",
                        rel.display()
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "layering broken:\n{}",
        violations.join("\n")
    );
    // The check really looks: this tree has files in every layer.
    assert!(files.len() > 20, "{files:?}");
}

#[test]
fn the_checker_sees_an_upward_import() {
    let refs = references(
        "use crate::glue::waiting::handoff; use super::super::commands::call;",
        &["store".to_string(), "key".to_string()],
    );
    assert!(refs.contains(&("waiting".to_string(), Some("handoff".to_string()))));
    assert!(refs.contains(&("commands".to_string(), Some("call".to_string()))));
}

#[test]
fn the_checker_sees_grouped_imports() {
    let refs = references(
        "use crate::glue::{jobs as _, waiting::{handoff, ties}};\nuse super::{self, acks};",
        &["waiting".to_string(), "queues".to_string()],
    );
    assert!(refs.contains(&("jobs".to_string(), None)), "{refs:?}");
    assert!(refs.contains(&("waiting".to_string(), Some("handoff".to_string()))));
    assert!(refs.contains(&("waiting".to_string(), Some("ties".to_string()))));
    assert!(refs.contains(&("waiting".to_string(), Some("acks".to_string()))));
}
