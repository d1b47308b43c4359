//! The `dptext` binary end to end, on a small synthetic vocabulary written
//! in the runtime layout (no downloaded assets needed).

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{assets, dptext, stdout};

#[test]
fn lines_are_sanitized_one_by_one_and_seeded_runs_agree() {
    let a = assets("lines");
    let input = "w1 w2 w3, W4!\n\nw5 unknownword w6\n";
    let args = ["sanitize", "--eps", "1", "--seed", "3"];
    let out = stdout(&dptext(&a, &args, input, &[]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1], "");
    assert!(lines[0].contains(", ") && lines[0].ends_with('!'));
    assert_ne!(lines[0], "w1 w2 w3, W4!");
    assert_eq!(out, stdout(&dptext(&a, &args, input, &[])));
    let other = stdout(&dptext(
        &a,
        &["sanitize", "--eps", "1", "--seed", "4"],
        input,
        &[],
    ));
    assert_ne!(out, other);
    fs::remove_dir_all(a).unwrap();
}

/// Input that is not UTF-8 (a Windows-1252 export) is refused naming its
/// line, in both line and JSON-lines mode.
#[test]
fn input_that_is_not_utf8_names_its_line() {
    let a = assets("latin1");
    let input: &[u8] = b"w1 w2\nw3 caf\xe9 w4\n";
    for (args, line) in [
        (&["sanitize", "--eps", "1", "--seed", "3"][..], "line 2"),
        (
            &[
                "sanitize", "--eps", "1", "--seed", "3", "--format", "jsonl", "--field", "t",
            ][..],
            "line 1",
        ),
    ] {
        let text: &[u8] = if line == "line 1" {
            b"{\"t\": \"caf\xe9\"}\n"
        } else {
            input
        };
        let o = common::dptext_bytes(&a, args, text, &[]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(line) && err.contains("UTF-8"), "{err}");
    }
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn keyed_mode_reads_the_key_from_the_environment() {
    let a = assets("key");
    let args = ["sanitize", "--eps", "1", "--key-env", "MY_KEY"];
    let k1 = stdout(&dptext(
        &a,
        &args,
        "w1 w2 w3 w4 w5 w6\n",
        &[("MY_KEY", "first key of the test")],
    ));
    assert_eq!(
        k1,
        stdout(&dptext(
            &a,
            &args,
            "w1 w2 w3 w4 w5 w6\n",
            &[("MY_KEY", "first key of the test")]
        ))
    );
    assert_ne!(
        k1,
        stdout(&dptext(
            &a,
            &args,
            "w1 w2 w3 w4 w5 w6\n",
            &[("MY_KEY", "second key of the test")]
        ))
    );
    let missing = dptext(&a, &args, "w1\n", &[]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("$MY_KEY is not set"));
    let empty = dptext(&a, &args, "w1\n", &[("MY_KEY", "")]);
    assert!(String::from_utf8_lossy(&empty.stderr).contains("$MY_KEY is empty"));
    // The same key from a private file gives the same output.
    use std::os::unix::fs::PermissionsExt;
    let kf = a.join("key");
    fs::write(&kf, "first key of the test\n").unwrap();
    fs::set_permissions(&kf, fs::Permissions::from_mode(0o600)).unwrap();
    let kf_s = kf.display().to_string();
    let from_file = ["sanitize", "--eps", "1", "--key-file", kf_s.as_str()];
    assert_eq!(
        k1,
        stdout(&dptext(&a, &from_file, "w1 w2 w3 w4 w5 w6\n", &[]))
    );
    fs::set_permissions(&kf, fs::Permissions::from_mode(0o644)).unwrap();
    let open = dptext(&a, &from_file, "w1\n", &[]);
    assert!(String::from_utf8_lossy(&open.stderr).contains("chmod 600"));
    let short = dptext(&a, &args, "w1\n", &[("MY_KEY", "short")]);
    assert!(String::from_utf8_lossy(&short.stderr).contains("at least 16 bytes"));
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn jsonl_field_is_sanitized_and_cost_added() {
    let a = assets("jsonl");
    let input = "{\"id\": 1, \"text\": \"w1 w2 w3\"}\n{\"id\": 2, \"text\": null}\n";
    let args = [
        "sanitize",
        "--mechanism",
        "santext_plus",
        "--eps",
        "2",
        "--format",
        "jsonl",
        "--field",
        "text",
        "--cost",
        "--seed",
        "1",
    ];
    let out = stdout(&dptext(&a, &args, input, &[]));
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["id"], 1);
    assert_eq!(rows[0]["text_cost"]["mechanism"], "santext_plus");
    assert_eq!(rows[0]["text_cost"]["tokens"], 3);
    // Null passes through as null, with a null cost.
    assert_eq!(
        rows[1],
        serde_json::json!({"id": 2, "text": null, "text_cost": null})
    );
    let no_field = dptext(
        &a,
        &["sanitize", "--eps", "2", "--format", "jsonl"],
        input,
        &[],
    );
    assert!(String::from_utf8_lossy(&no_field.stderr).contains("needs --field"));
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn csv_column_is_sanitized_and_others_kept() {
    let a = assets("csv");
    let input = "id,note,ward\n1,\"w1 w2, w3\",north\n2,w4,south\n";
    let args = [
        "sanitize", "--eps", "1", "--format", "csv", "--field", "note", "--seed", "2",
    ];
    let out = stdout(&dptext(&a, &args, input, &[]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "id,note,ward");
    assert!(
        lines[1].starts_with("1,\"") && lines[1].ends_with("\",north"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("2,w") && lines[2].ends_with(",south"),
        "{}",
        lines[2]
    );
    let bad = dptext(
        &a,
        &[
            "sanitize", "--eps", "1", "--format", "csv", "--field", "nope",
        ],
        input,
        &[],
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no column \"nope\""));
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn bad_parameters_and_missing_assets_are_clear_errors() {
    let a = assets("errors");
    for (args, msg) in [
        (vec!["sanitize", "--eps", "0"], "\"eps\": must be > 0"),
        (
            vec!["sanitize", "--eps", "NaN"],
            "\"eps\": must be a number > 0, got NaN",
        ),
        (
            vec![
                "sanitize",
                "--mechanism",
                "santext_plus",
                "--eps",
                "1",
                "--p",
                "2",
            ],
            "\"p\": must be in [0, 1]",
        ),
        (
            vec!["sanitize", "--mechanism", "rot13", "--eps", "1"],
            "unknown mechanism \"rot13\"",
        ),
        (
            vec!["sanitize", "--eps", "1", "--embedding", "wordpiece"],
            "dptext assets fetch",
        ),
    ] {
        let o = dptext(&a, &args, "w1\n", &[]);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(msg), "{args:?}: {err}");
    }
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn verify_reports_what_is_missing_and_names_fetch() {
    let a = assets("verify");
    let o = dptext(&a, &["assets", "verify"], "", &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("onnxruntime==1.31.1 is not installed"),
        "{err}"
    );
    assert!(err.contains("run `dptext assets fetch`"), "{err}");
    let p = dptext(&a, &["assets", "path"], "", &[]);
    assert_eq!(stdout(&p).trim(), a.display().to_string());
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn custext_through_params_and_custext_map() {
    let a = assets("custext");
    let map = dptext(
        &a,
        &["custext-map", "--k", "5", "--mapping", "conservative"],
        "",
        &[],
    );
    let out = stdout(&map);
    assert!(
        out.contains("k 5, conservative mapping")
            && out.contains("100.00% of tokens have adjacent tokens"),
        "{out}"
    );
    assert!(
        a.join("custext").read_dir().unwrap().count() == 1,
        "mapping cached"
    );
    let args = [
        "sanitize",
        "--mechanism",
        "custext",
        "--eps",
        "1",
        "--seed",
        "1",
        "--params",
        r#"{"k": 5, "mapping": "conservative", "level": "token"}"#,
    ];
    let out = stdout(&dptext(&a, &args, "w1 w2 w3\n", &[]));
    assert_eq!(out.split_whitespace().count(), 3, "{out}");
    // A mapping built for the command says so, with its true time, even
    // when stderr is not a terminal.
    let built = dptext(
        &a,
        &[
            "sanitize",
            "--mechanism",
            "custext",
            "--eps",
            "1",
            "--seed",
            "1",
            "--params",
            r#"{"k": 4, "mapping": "balanced"}"#,
        ],
        "w1 w2\n",
        &[],
    );
    let err = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "{err}");
    assert!(
        err.contains("building the CusText mapping: ") && err.contains(" words in "),
        "{err}"
    );
    let bad = dptext(
        &a,
        &[
            "sanitize",
            "--mechanism",
            "custext",
            "--eps",
            "1",
            "--params",
            "[1]",
        ],
        "w1\n",
        &[],
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--params must be a JSON object"));
    let bad = dptext(
        &a,
        &[
            "sanitize",
            "--mechanism",
            "custext",
            "--eps",
            "1",
            "--params",
            r#"{"k": 0}"#,
        ],
        "w1\n",
        &[],
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("\"k\": must be in [1, 2000]"));
    fs::remove_dir_all(a).unwrap();
}

/// The real assets (detection model, ONNX Runtime) and the committed
/// masked LM, or `None` to skip (unless `DPTEXT_REQUIRE_ASSETS=1`).
fn real_assets() -> Option<(PathBuf, PathBuf)> {
    let mlm = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/mlm");
    dptext_core::assets::load_or_skip(|dir| {
        for asset in ["rampart", "onnxruntime"] {
            if !dir.join(asset).is_dir() {
                return Err(dptext_core::Error::MissingAsset {
                    asset: asset.into(),
                    path: dir.join(asset),
                });
            }
        }
        Ok((dir.to_path_buf(), mlm))
    })
}

#[test]
fn ndd_distorts_spans_with_the_given_model_device_and_threads() {
    let Some((a, mlm)) = real_assets() else {
        return;
    };
    let mlm = mlm.to_string_lossy().into_owned();
    let input = "Patient John Smith was seen in Boston on Monday.\nNo names here.\n";
    let args = |device: &'static str| {
        vec![
            "sanitize".to_string(),
            "--mechanism".into(),
            "ndd".into(),
            "--mlm-model".into(),
            mlm.clone(),
            "--device".into(),
            device.into(),
            "--threads".into(),
            "1".into(),
            "--seed".into(),
            "5".into(),
        ]
    };
    let run = |device: &'static str| {
        let args = args(device);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        dptext(&a, &args, input, &[])
    };
    let cpu = run("cpu");
    let out = stdout(&cpu);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(!lines[0].contains("John Smith"), "{out}");
    assert!(
        lines[0].starts_with("Patient ") && lines[0].contains(" was seen in "),
        "{out}"
    );
    assert_eq!(lines[1], "No names here.");
    // Seeded: the same text again; CUDA without the cuda feature or a GPU
    // falls back to the CPU with one warning per model and the same text.
    assert_eq!(out, stdout(&run("cpu")));
    let cuda = run("cuda");
    let warnings = String::from_utf8_lossy(&cuda.stderr);
    let fallbacks = warnings
        .matches("CUDA unavailable, running on the CPU")
        .count();
    if fallbacks > 0 || !cfg!(feature = "cuda") {
        // One per model: the detection model and the masked LM.
        assert_eq!(fallbacks, 2, "one fallback warning per model: {warnings}");
        assert!(warnings.contains("rampart"), "{warnings}");
        assert!(warnings.contains("mlm"), "{warnings}");
        assert_eq!(stdout(&cuda), out);
    } else {
        // A cuda build on a GPU machine: CUDA ran. Near-ties (about 1e-5)
        // may be ordered differently from the CPU, so only the shape of
        // the result is compared.
        let text = stdout(&cuda);
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got.len(), 2, "{text}");
        assert!(
            !got[0].contains("John Smith")
                && got[0].starts_with("Patient ")
                && got[0].contains(" was seen in "),
            "{text}"
        );
        assert_eq!(got[1], "No names here.");
    }
    // A model directory that does not exist, a device that does not exist.
    let missing = dptext(
        &a,
        &[
            "sanitize",
            "--mechanism",
            "ndd",
            "--mlm-model",
            "/nonexistent/mlm",
            "--seed",
            "1",
        ],
        input,
        &[],
    );
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("/nonexistent/mlm"), "{err}");
    let bad = dptext(
        &a,
        &["sanitize", "--mechanism", "ndd", "--device", "tpu"],
        input,
        &[],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("tpu"));
}
