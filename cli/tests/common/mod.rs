//! Helpers shared by the CLI's integration tests: a synthetic assets set
//! and a way to run the built binary.

#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const WORDS: usize = 400;

/// A temporary assets directory with a synthetic `glove-6b-50d` set whose
/// words are `w0` .. `w399`.
pub fn assets(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dptext-cli-{tag}-{}", std::process::id()));
    let g = dir.join("glove-6b-50d");
    fs::create_dir_all(&g).unwrap();
    let words: String = (0..WORDS).map(|i| format!("w{i}\n")).collect();
    fs::write(g.join("words.txt"), words).unwrap();
    // Deterministic pseudo-random vectors in 4 dimensions.
    let mut x: u32 = 12345;
    let bytes: Vec<u8> = (0..WORDS * 4)
        .flat_map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            ((x >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0).to_le_bytes()
        })
        .collect();
    fs::write(g.join("vectors.f32"), bytes).unwrap();
    fs::write(
        g.join("meta.json"),
        format!(
            r#"{{"name":"glove-6b-50d","kind":"word","rows":{WORDS},"dim":4,"source":"test"}}"#
        ),
    )
    .unwrap();
    dir
}

pub fn dptext(assets: &Path, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    dptext_bytes(assets, args, stdin.as_bytes(), env)
}

/// [`dptext`] with input that need not be UTF-8.
pub fn dptext_bytes(assets: &Path, args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dptext"))
        .arg("--assets")
        .arg(assets)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dptext runs");
    // The process may exit (on a bad argument) before reading its input,
    // so a broken pipe here is expected, not a failure.
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin);
    }
    child.wait_with_output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}
