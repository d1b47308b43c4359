//! The README's detection example is real output: the command it shows,
//! run on the note it shows, prints the line it shows. Needs the installed
//! assets (`DPTEXT_ASSETS`); skipped without them unless
//! `DPTEXT_REQUIRE_ASSETS=1`.

use std::io::Write;
use std::process::{Command, Stdio};

const NOTE: &str = r#"{"patient": "KOWALCZYK, HELENA M", "mrn": "00483917", "note": "Mrs. Kowalczyk is a 91 yo F seen 02/16/2023, discharged 02/21/2023. Daughter Irena lives in Parma Heights. MR: 00483917. Attending: Dr. Okafor.\nCO/ts"}"#;

#[test]
fn the_readmes_operators_example_is_what_the_command_prints() {
    let Ok(assets) = std::env::var("DPTEXT_ASSETS") else {
        assert!(
            std::env::var("DPTEXT_REQUIRE_ASSETS").as_deref() != Ok("1"),
            "DPTEXT_REQUIRE_ASSETS=1 but DPTEXT_ASSETS is not set"
        );
        eprintln!("skipping: DPTEXT_ASSETS is not set");
        return;
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_dptext"))
        .args([
            "--assets",
            &assets,
            "sanitize",
            "--format",
            "jsonl",
            "--seed",
            "7",
            "--field",
            "patient=deidentify:whole=true",
            "--field",
            "note=deidentify:operators=DATE:shift;ID:redact,shift_days=30",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{NOTE}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    let line = line.trim_end();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    assert!(
        readme.contains(line),
        "README.md no longer shows what the command prints; it prints:\n{line}"
    );
    assert!(
        readme.contains("KOWALCZYK, HELENA M"),
        "the README shows the input too"
    );
}
