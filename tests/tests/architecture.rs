//! docs/architecture.md names every source file: a file is named when its
//! path (`proxy/src/wire.rs`) or its module name (`wire`) appears in
//! backticks outside code blocks. A new file that the document does not
//! name fails this test, so the map stays complete.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every backticked name of the document outside fenced code blocks, and
/// every part of it split at separators (`ffi/store` names `ffi` and
/// `store`).
fn named(doc: &str) -> HashSet<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    let mut names = HashSet::new();
    for (i, part) in prose.split('`').enumerate() {
        if i % 2 == 1 && !part.contains('\n') {
            names.insert(part.to_string());
            for piece in part.split(|c: char| " /,().:;".contains(c)) {
                names.insert(piece.trim_end_matches(".rs").to_string());
            }
        }
    }
    names
}

#[test]
fn architecture_names_every_source_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the document");
    let names = named(&doc);
    let mut files = Vec::new();
    for crate_src in ["core/src", "extension/src", "proxy/src", "cli/src"] {
        rust_files(&root.join(crate_src), &mut files);
    }
    assert!(files.len() > 100, "only {} source files found", files.len());
    let mut missing: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let rel = f
                .strip_prefix(&root)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            let stem = f.file_stem()?.to_string_lossy().to_string();
            let named = ["mod", "lib", "main"].contains(&stem.as_str())
                || names.contains(&rel)
                || names.contains(&stem);
            (!named).then_some(rel)
        })
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name {} source files: {missing:?}",
        missing.len()
    );
}

/// The test can fail: a document without the table misses files.
#[test]
fn an_incomplete_document_is_caught() {
    let names = named("| `engine` | job |\n```\n`wire`\n```\n");
    assert!(names.contains("engine"));
    assert!(!names.contains("wire"), "a code block does not name files");
}
