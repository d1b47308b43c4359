//! Without `--assets` or `DPTEXT_ASSETS`, the command finds the set that
//! scripts/setup.sh installed for a clone (`target/assets` beside
//! `target/release/dptext`), and otherwise says every place it looked.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

/// Runs a copy of the binary with a clean environment: no DPTEXT_ASSETS,
/// an empty home, no XDG cache dir.
fn run(bin: &Path, home: &Path, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(bin)
        .args(args)
        .env_remove("DPTEXT_ASSETS")
        .env_remove("XDG_CACHE_HOME")
        .env("HOME", home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    child.wait_with_output().unwrap()
}

#[test]
fn the_clones_target_assets_are_found_without_dptext_assets() {
    let root = std::env::temp_dir().join(format!("dptext-cli-clone-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let release = root.join("target/release");
    fs::create_dir_all(&release).unwrap();
    let bin = release.join("dptext");
    fs::copy(env!("CARGO_BIN_EXE_dptext"), &bin).unwrap();
    let home = root.join("home");
    fs::create_dir_all(&home).unwrap();
    let installed = root.join("target/assets");
    let cache = home.join(".cache/dptext");

    // Nothing installed anywhere: the error lists both places and the variable.
    let o = run(&bin, &home, &["sanitize", "--eps", "1"], "w1\n");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&cache.display().to_string()), "{err}");
    assert!(
        err.contains(&installed.display().to_string()) && err.contains("DPTEXT_ASSETS=DIR"),
        "{err}"
    );

    // The set-up's layout: an installed set in target/assets.
    let synthetic = common::assets("clone-set");
    fs::rename(&synthetic, &installed).unwrap();
    fs::write(
        installed.join("installed.json"),
        r#"{"packages": {}, "files": {}}"#,
    )
    .unwrap();
    let o = run(&bin, &home, &["assets", "path"], "");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        installed.canonicalize().unwrap().display().to_string()
    );
    let o = run(
        &bin,
        &home,
        &["sanitize", "--eps", "1", "--seed", "1"],
        "w1 w2\n",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .count(),
        2
    );
    fs::remove_dir_all(root).unwrap();
}
