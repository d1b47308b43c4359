//! `dptext sanitize` fails closed on fields and columns, takes several
//! fields with their own mechanisms, writes `--output` atomically, reports
//! cost in every format and keeps JSON lines byte for byte.

mod common;

use std::fs;
use std::process::Output;

use common::{assets, dptext, stdout};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Fails, says `msg`, and wrote nothing to stdout.
fn refused(o: &Output, msg: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "should fail: {err}");
    assert!(err.contains(msg), "{msg:?} not in: {err}");
    assert!(
        o.stdout.is_empty(),
        "wrote output: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn a_jsonl_field_that_does_not_exist_is_an_error_with_no_output() {
    let a = assets("typo-jsonl");
    let base = ["sanitize", "--eps", "1", "--seed", "1", "--format", "jsonl"];
    let run = |field: &str, input: &str| {
        let mut args = base.to_vec();
        args.extend(["--field", field]);
        dptext(&a, &args, input, &[])
    };
    // A typo: before, exit 0 with the input copied raw.
    let input = "{\"id\": 1, \"note\": \"w1 w2\"}\n";
    refused(
        &run("nte", input),
        "line 1: no field \"nte\" (the line has id, note)",
    );
    // A later line without the field: nothing of line 1 comes out either.
    let input = "{\"note\": \"w1 w2\"}\n{\"id\": 2}\n";
    refused(&run("note", input), "line 2: no field \"note\"");
    // Not a string.
    refused(
        &run("note", "{\"note\": 5}\n"),
        "line 1: field \"note\" is a number",
    );
    refused(&run("note", "[1]\n"), "line 1: not a JSON object");
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn a_csv_column_that_does_not_exist_names_the_header_and_writes_nothing() {
    let a = assets("typo-csv");
    let o = dptext(
        &a,
        &[
            "sanitize", "--eps", "1", "--format", "csv", "--field", "nte",
        ],
        "id,note\n1,w1\n",
        &[],
    );
    refused(&o, "no column \"nte\" in the CSV header (\"id\", \"note\")");
    // --field has no meaning for whole lines: refused, not ignored.
    let o = dptext(&a, &["sanitize", "--eps", "1", "--field", "x"], "w1\n", &[]);
    refused(&o, "--field applies to --format jsonl and csv");
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn several_fields_each_with_its_own_mechanism() {
    let a = assets("fields");
    let input = "id,a,b,c\n1,w1 w2,w3 w4,w5\n2,w6,w7,w8\n";
    let args = [
        "sanitize",
        "--format",
        "csv",
        "--eps",
        "1",
        "--field",
        "a",
        "--field",
        "b=santext_plus:eps=2,p=0.5",
        "--field",
        "c=custext:eps=1,k=5,mapping=conservative",
        "--cost",
        "--seed",
        "4",
    ];
    let out = stdout(&dptext(&a, &args, input, &[]));
    let mut rdr = csv::Reader::from_reader(out.as_bytes());
    assert_eq!(
        rdr.headers().unwrap().iter().collect::<Vec<_>>(),
        ["id", "a", "b", "c", "a_cost", "b_cost", "c_cost"]
    );
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2);
    for (col, mechanism) in [(4, "santext"), (5, "santext_plus"), (6, "custext")] {
        let cost: serde_json::Value = serde_json::from_str(&rows[0][col]).unwrap();
        assert_eq!(cost["mechanism"], mechanism, "{}", &rows[0][col]);
    }
    let cost: serde_json::Value = serde_json::from_str(&rows[0][4]).unwrap();
    assert_eq!(cost["tokens"], 2);
    assert_eq!(&rows[0][0], "1");
    assert_eq!(rows[0][1].split(' ').count(), 2);
    // Seeded: the same again.
    assert_eq!(out, stdout(&dptext(&a, &args, input, &[])));
    // A field named twice, a field mechanism without its eps, global flags
    // that no field uses.
    let o = dptext(
        &a,
        &[
            "sanitize", "--format", "csv", "--eps", "1", "--field", "a", "--field", "a",
        ],
        input,
        &[],
    );
    refused(&o, "--field \"a\" is given twice");
    let o = dptext(
        &a,
        &["sanitize", "--format", "csv", "--field", "a=santext_plus"],
        input,
        &[],
    );
    refused(
        &o,
        "santext_plus needs eps (the privacy parameter, > 0; smaller is more private): add --field a=santext_plus:eps=...",
    );
    let o = dptext(
        &a,
        &[
            "sanitize",
            "--format",
            "csv",
            "--eps",
            "2",
            "--field",
            "a=santext:eps=1",
        ],
        input,
        &[],
    );
    refused(&o, "every --field here names its own mechanism");
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn missing_eps_names_the_flag() {
    let a = assets("no-eps");
    let o = dptext(
        &a,
        &["sanitize", "--mechanism", "santext_plus"],
        "w1\n",
        &[],
    );
    refused(&o, "santext_plus needs eps");
    assert!(
        stderr(&o).contains("add --eps (e.g. --eps 3)"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("missing field"), "{}", stderr(&o));
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn output_is_renamed_into_place_and_nothing_is_left_on_error() {
    let a = assets("output");
    let dir = a.join("out");
    fs::create_dir_all(&dir).unwrap();
    let target = dir.join("clean.jsonl");
    let t = target.to_string_lossy().into_owned();
    let args = [
        "sanitize", "--eps", "1", "--seed", "1", "--format", "jsonl", "--field", "note", "-o", &t,
    ];
    let good = "{\"note\": \"w1 w2\"}\n";
    let o = dptext(&a, &args, good, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let first = fs::read_to_string(&target).unwrap();
    assert!(first.starts_with("{\"note\": \"w"), "{first}");
    // A failing run leaves the previous file as it was and no temporary file.
    let o = dptext(&a, &args, "{\"note\": \"w3\"}\n{\"nte\": \"w4\"}\n", &[]);
    refused(&o, "line 2: no field \"note\"");
    assert_eq!(fs::read_to_string(&target).unwrap(), first);
    let names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["clean.jsonl"]);
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn cost_goes_somewhere_in_every_format() {
    let a = assets("cost");
    let lines = stdout(&dptext(
        &a,
        &["sanitize", "--eps", "1", "--seed", "1", "--cost"],
        "w1 w2\n",
        &[],
    ));
    let v: serde_json::Value = serde_json::from_str(lines.trim()).unwrap();
    assert_eq!(v["cost"]["mechanism"], "santext");
    // Before: --cost was silently ignored for CSV.
    let csv_out = stdout(&dptext(
        &a,
        &[
            "sanitize", "--eps", "1", "--seed", "1", "--cost", "--format", "csv", "--field", "note",
        ],
        "id,note\n1,w1 w2\n",
        &[],
    ));
    assert!(csv_out.starts_with("id,note,note_cost\n1,"), "{csv_out}");
    assert!(
        csv_out.contains("\"\"mechanism\"\":\"\"santext\"\""),
        "{csv_out}"
    );
    // A column the cost would overwrite is refused.
    let o = dptext(
        &a,
        &[
            "sanitize", "--eps", "1", "--cost", "--format", "csv", "--field", "note",
        ],
        "note,note_cost\nw1,x\n",
        &[],
    );
    refused(&o, "already has a column \"note_cost\"");
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn json_lines_keep_key_order_and_untouched_bytes() {
    let a = assets("order");
    let input = "{\"z\": 1.50, \"note\" : \"w1 w2\", \"a\": {\"y\": [1, 2], \"b\": \"\\u00e9\"}, \"id\": 100000000000000000000001}\n";
    let out = stdout(&dptext(
        &a,
        &[
            "sanitize", "--eps", "1", "--seed", "2", "--format", "jsonl", "--field", "note",
        ],
        input,
        &[],
    ));
    let line = out.trim_end();
    assert!(line.starts_with("{\"z\": 1.50, \"note\" : \"w"), "{line}");
    assert!(
        line.ends_with(
            "\", \"a\": {\"y\": [1, 2], \"b\": \"\\u00e9\"}, \"id\": 100000000000000000000001}"
        ),
        "{line}"
    );
    assert_ne!(line, input.trim_end());
    // Progress bars stay off when stderr is not a terminal: one summary line.
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn stderr_is_only_the_summary_when_not_a_terminal() {
    let a = assets("quiet");
    let o = dptext(&a, &["sanitize", "--eps", "1"], "w1\nw2\n", &[]);
    assert!(o.status.success());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("sanitized 2 values"), "{err}");
    fs::remove_dir_all(a).unwrap();
}

#[test]
fn assets_fetch_refuses_an_unknown_id() {
    let a = assets("only");
    let o = dptext(&a, &["assets", "fetch", "--only", "foo"], "", &[]);
    refused(
        &o,
        "unknown asset id \"foo\": the known ids are onnxruntime, glove-6b-50d",
    );
    assert!(stderr(&o).contains("mlm"), "{}", stderr(&o));
    fs::remove_dir_all(a).unwrap();
}

/// Values are read and sanitized 64 at a time: a value's output does not
/// depend on the chunk it fell in (a file less its first record shifts
/// every chunk by one), in any format, and an error in a later chunk still
/// writes nothing.
#[test]
fn chunks_change_no_output_and_a_late_error_writes_nothing() {
    let a = assets("chunks");
    let notes: Vec<String> = (0..150)
        .map(|i| format!("w{} w{} w{}", i, i + 1, (i * 7) % 400))
        .collect();
    let jsonl: Vec<String> = notes
        .iter()
        .enumerate()
        .map(|(i, n)| match i % 10 {
            3 => format!("{{\"id\": {i}, \"note\": null}}"),
            _ => format!("{{\"id\": {i}, \"note\": {n:?}}}"),
        })
        .collect();
    let csv: Vec<String> = notes.iter().map(|n| format!("x,{n}")).collect();
    let run = |args: &[&str], records: &[String], header: &str| {
        let mut all = vec!["sanitize", "--eps", "1", "--seed", "4"];
        all.extend_from_slice(args);
        dptext(&a, &all, &format!("{header}{}\n", records.join("\n")), &[])
    };
    for (args, records, header) in [
        (vec![], &notes, ""),
        (vec!["--format", "jsonl", "--field", "note"], &jsonl, ""),
        (
            vec!["--format", "csv", "--field", "note"],
            &csv,
            "id,note\n",
        ),
    ] {
        let whole = stdout(&run(&args, records, header));
        let tail = stdout(&run(&args, &records[1..], header));
        let skip = usize::from(!header.is_empty());
        let whole: Vec<&str> = whole.lines().skip(skip).collect();
        let tail: Vec<&str> = tail.lines().skip(skip).collect();
        assert_eq!(whole.len(), 150, "{args:?}");
        assert_eq!(whole[1..], tail[..], "{args:?}");
        assert_ne!(whole[1], records[1], "{args:?}: sanitized");
    }
    let mut bad = jsonl.clone();
    bad[100] = "{\"id\": 100, \"nte\": \"w1\"}".to_string();
    refused(
        &run(&["--format", "jsonl", "--field", "note"], &bad, ""),
        "line 101: no field \"note\"",
    );
    fs::remove_dir_all(a).unwrap();
}
