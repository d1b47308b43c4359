//! `dptext vocab`: build a vocabulary from a file, list and show it, and
//! sanitize with it, over the synthetic assets (words `w0` .. `w399`).

mod common;

use std::fs;

use common::{assets, dptext, stdout};

#[test]
fn build_list_show_and_sanitize_with_a_vocabulary() {
    let a = assets("vocab");
    // 600 values share w1 w2 w3; w9 is in one value only.
    let mut input: String = (0..600)
        .map(|i| format!("w1 w2 W3 w1 w{}\n", 100 + i % 30))
        .collect();
    input.push_str("w9 w1\n");
    let file = a.join("notes.txt");
    fs::write(&file, input).unwrap();
    let file = file.to_str().unwrap();
    let build = [
        "vocab",
        "build",
        "--input",
        file,
        "--eps",
        "2",
        "--delta",
        "1e-6",
        "--max-words-per-value",
        "4",
        "--name",
        "notes",
        "--seed",
        "1",
    ];
    let out = stdout(&dptext(&a, &build, "", &[]));
    assert!(
        out.contains(
            "vocabulary notes: 3 words released of 34 distinct embedding words in 601 values"
        ),
        "{out}"
    );
    assert!(out.contains("threshold"), "{out}");
    // The name is taken: refused unless --replace.
    let again = dptext(&a, &build, "", &[]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));

    let list = stdout(&dptext(&a, &["vocab", "list"], "", &[]));
    assert!(
        list.starts_with("notes\t3 words\teps 2 delta 0.000001"),
        "{list}"
    );
    let show = stdout(&dptext(&a, &["vocab", "show", "notes"], "", &[]));
    let first = show
        .lines()
        .find_map(|l| l.strip_prefix("first words: "))
        .unwrap();
    let mut first: Vec<&str> = first.split(' ').collect();
    first.sort_unstable();
    assert_eq!(first, ["w1", "w2", "w3"], "{show}");

    let sanitized = stdout(&dptext(
        &a,
        &[
            "sanitize",
            "--eps",
            "1",
            "--params",
            r#"{"vocabulary": "notes"}"#,
            "--seed",
            "2",
        ],
        "w5 w6 w7 w8 w9 w1\n",
        &[],
    ));
    for w in sanitized.split_whitespace() {
        assert!(["w1", "w2", "w3"].contains(&w), "{sanitized}");
    }
    let csv = stdout(&dptext(
        &a,
        &[
            "sanitize",
            "--format",
            "csv",
            "--field",
            "note=custext:eps=2,k=2,vocabulary=notes",
            "--cost",
            "--seed",
            "2",
        ],
        "id,note\n1,w5 w1\n",
        &[],
    ));
    assert!(
        csv.contains("\"\"vocabulary\"\":{\"\"name\"\":\"\"notes\"\""),
        "{csv}"
    );
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn bad_release_parameters_are_clear_errors() {
    let a = assets("vocab-errors");
    let file = a.join("x.txt");
    fs::write(&file, "w1\n").unwrap();
    let file = file.to_str().unwrap();
    for (extra, msg) in [
        (
            ["--delta", "0", "--name", "x"],
            "\"delta\": must be in (0, 0.5)",
        ),
        (
            ["--delta", "1e-6", "--name", "../x"],
            "not a vocabulary name",
        ),
    ] {
        let mut args = vec!["vocab", "build", "--input", file, "--eps", "1"];
        args.extend(extra);
        let o = dptext(&a, &args, "", &[]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(msg), "{err}");
    }
    let o = dptext(
        &a,
        &[
            "sanitize",
            "--eps",
            "1",
            "--params",
            r#"{"vocabulary": "nope"}"#,
        ],
        "w1\n",
        &[],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no vocabulary named \"nope\""));
    fs::remove_dir_all(a).unwrap();
}
