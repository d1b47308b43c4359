//! `dptext eval`: its refusals, and a run on the demo notes with the
//! installed assets (`DPTEXT_ASSETS`, skipped without them unless
//! `DPTEXT_REQUIRE_ASSETS=1`), from a CSV file and from a table
//! (`DPTEXT_TEST_DB`, skipped without it unless `DPTEXT_REQUIRE_PG=1`).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assets, dptext};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let a = assets("eval-refusals");
    let csv = a.join("notes.csv");
    std::fs::write(&csv, "id,note\n1,fever\n").unwrap();
    let csv = csv.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["eval"], "give an input file"),
        (
            &["eval", "--format", "csv", "--field", "nte", csv],
            "no column \"nte\"",
        ),
        (
            &[
                "eval", "--format", "csv", "--field", "note", "--label", "kind", csv,
            ],
            "no column \"kind\"",
        ),
        (&["eval", "--format", "csv", csv], "need --field"),
        (
            &[
                "eval",
                "--format",
                "csv",
                "--field",
                "note",
                "--mechanism",
                "santxt",
                csv,
            ],
            "santxt",
        ),
        (
            &[
                "eval", "--format", "csv", "--field", "note", "--eps", "0", csv,
            ],
            "eps",
        ),
        (
            &[
                "eval", "--format", "csv", "--field", "note", "--sample", "0", csv,
            ],
            "--sample must be at least 1",
        ),
        (
            &[
                "eval",
                "--format",
                "csv",
                "--field",
                "note",
                "--mechanism",
                "deidentify",
                "--vocabulary",
                "x",
                csv,
            ],
            "takes a vocabulary",
        ),
        (&["eval", "--table", "t", "--column", "c"], "--dsn"),
    ];
    for (args, want) in cases {
        let out = dptext(&a, args, "", &[]);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
}

/// The installed assets, or `None` (skip) when the run may skip.
fn real_assets() -> Option<PathBuf> {
    match std::env::var("DPTEXT_ASSETS") {
        Ok(a) => Some(PathBuf::from(a)),
        Err(_) => {
            assert!(
                std::env::var("DPTEXT_REQUIRE_ASSETS").as_deref() != Ok("1"),
                "DPTEXT_REQUIRE_ASSETS=1 but DPTEXT_ASSETS is not set"
            );
            eprintln!("skipping: DPTEXT_ASSETS is not set");
            None
        }
    }
}

/// The demo notes as CSV with their complaint class, from the generator.
fn demo_csv(dir: &Path) -> PathBuf {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/gen_demo_data.py");
    let out = Command::new("python3")
        .args([script, "--csv"])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let path = dir.join("demo_notes.csv");
    std::fs::write(&path, out.stdout).unwrap();
    path
}

/// results.csv as one map per row.
fn results(dir: &Path) -> Vec<HashMap<String, String>> {
    let mut r = csv::Reader::from_path(dir.join("results.csv")).unwrap();
    let head = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            head.iter()
                .zip(rec.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn num(row: &HashMap<String, String>, key: &str) -> f64 {
    row[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key} = {:?}", row[key]))
}

#[test]
fn the_demo_notes_give_a_table_a_csv_and_plots() {
    let Some(assets) = real_assets() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let csv = demo_csv(tmp.path());
    let out_dir = tmp.path().join("report");
    let args = [
        "eval",
        "--format",
        "csv",
        "--field",
        "note",
        "--label",
        "complaint",
        "--sample",
        "150",
        "--mechanism",
        "santext",
        "--mechanism",
        "deidentify",
        "--eps",
        "1,8",
        "--queries",
        "5",
        "--attack-values",
        "5",
        "--p0-words",
        "happy",
        "--p0-draws",
        "200",
        "--out",
        out_dir.to_str().unwrap(),
        csv.to_str().unwrap(),
    ];
    let out = dptext(&assets, &args, "", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("150 values"), "{table}");
    assert!(table.contains("classifier trained on originals"), "{table}");
    assert!(table.contains("mechanism"), "{table}");
    assert!(table.contains("unchanged"), "{table}");
    assert!(
        table.contains("PII words kept verbatim, per label"),
        "{table}"
    );
    assert!(table.contains("happy: p0"), "{table}");

    let rows = results(&out_dir);
    assert_eq!(rows.len(), 3, "{rows:?}");
    let (lo, hi, deid) = (&rows[0], &rows[1], &rows[2]);
    assert_eq!(lo["eps"], "1");
    assert_eq!(hi["eps"], "8");
    assert_eq!(deid["mechanism"], "deidentify");
    // More eps: more words left, more similar, a larger worst case.
    assert!(num(lo, "unchanged_share") < 0.05, "{lo:?}");
    assert!(num(hi, "unchanged_share") > 0.5, "{hi:?}");
    assert!(num(hi, "similarity_mean") > num(lo, "similarity_mean") + 0.05);
    assert!(num(hi, "worst_case_eps_median") > num(lo, "worst_case_eps_median"));
    // Entity replacement removes more names than SanText at eps 8 keeps.
    assert!(num(deid, "pii_kept_PERSON") < 0.1, "{deid:?}");
    assert!(num(hi, "pii_kept_PERSON") > 0.5, "{hi:?}");
    // The complaint can be read off the originals well above chance (6
    // classes), and SanText at eps 1 destroys most of it.
    let base = num(lo, "classifier_baseline");
    assert!(base > 0.5, "baseline {base}");
    assert!(num(lo, "classifier_accuracy") < base, "{lo:?}");
    // Keyed outputs repeat, so asking again recovers no more than one
    // output keeps; with fresh randomness a majority vote recovers more.
    assert!(num(lo, "query_attack_keyed") <= num(lo, "query_attack_fresh") + 0.05);
    for name in [
        "privacy_utility.png",
        "pii_utility.png",
        "classifier.png",
        "query_attack.png",
        "utility_by_eps.png",
        "p0.csv",
    ] {
        let bytes = std::fs::read(out_dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        if name.ends_with(".png") {
            assert_eq!(&bytes[..4], b"\x89PNG", "{name}");
            assert!(bytes.len() > 10_000, "{name}: {} bytes", bytes.len());
        }
    }
}

#[test]
fn a_table_column_is_read_over_a_connection() {
    let Some(assets) = real_assets() else {
        return;
    };
    let Ok(db) = std::env::var("DPTEXT_TEST_DB") else {
        assert!(
            std::env::var("DPTEXT_REQUIRE_PG").as_deref() != Ok("1"),
            "DPTEXT_REQUIRE_PG=1 but DPTEXT_TEST_DB is not set"
        );
        eprintln!("skipping: DPTEXT_TEST_DB is not set");
        return;
    };
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let dsn = format!(
        "host={} port={} user={} dbname={db}",
        env("PGHOST", "/var/run/postgresql"),
        env("PGPORT", "5432"),
        env("PGUSER", "postgres")
    );
    let mut client = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "DROP TABLE IF EXISTS eval_notes; \
             CREATE TABLE eval_notes (id int, \"Note Text\" text, kind text); \
             INSERT INTO eval_notes SELECT i, CASE WHEN i % 10 = 0 THEN NULL \
               ELSE 'Patient Jane Doe reports fever and cough, seen on March ' || i || '.' END, \
               CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END FROM generate_series(1, 50) i;",
        )
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("report");
    let args = [
        "eval",
        "--dsn",
        &dsn,
        "--table",
        "public.eval_notes",
        "--column",
        "Note Text",
        "--label",
        "kind",
        "--sample",
        "30",
        "--mechanism",
        "santext",
        "--eps",
        "3",
        "--queries",
        "0",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    let out = dptext(&assets, &args, "", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    // 45 non-NULL notes, 5 NULLs skipped, 30 sampled.
    assert!(
        stderr(&out).contains("sampled 30 of 45 values from public.eval_notes.Note Text"),
        "{}",
        stderr(&out)
    );
    let rows = results(&out_dir);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["values"], "30");
    assert_eq!(rows[0]["query_attack_fresh"], "");

    // dptext vocab build reads the same column, every value of it, into a
    // vocabulary of its own assets folder.
    let vocab_assets = tmp.path().join("assets");
    std::fs::create_dir_all(&vocab_assets).unwrap();
    for entry in std::fs::read_dir(&assets).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name != "vocabularies" {
            std::os::unix::fs::symlink(entry.path(), vocab_assets.join(&name)).unwrap();
        }
    }
    let build = [
        "vocab",
        "build",
        "--dsn",
        &dsn,
        "--table",
        "public.eval_notes",
        "--column",
        "Note Text",
        "--eps",
        "5",
        "--delta",
        "1e-3",
        "--max-words-per-value",
        "4",
        "--name",
        "from-table",
        "--seed",
        "1",
    ];
    let out = dptext(&vocab_assets, &build, "", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("in 45 values"), "{said}");
    let show = dptext(&vocab_assets, &["vocab", "show", "from-table"], "", &[]);
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(
        shown.contains("source: public.eval_notes.Note Text"),
        "{shown}"
    );
    // A file and a table at once is refused.
    let both = dptext(
        &vocab_assets,
        &[
            "vocab", "build", "--input", "x.txt", "--table", "t", "--column", "c", "--dsn", "d",
            "--eps", "1", "--delta", "1e-3", "--name", "n",
        ],
        "",
        &[],
    );
    assert!(!both.status.success());
    client.batch_execute("DROP TABLE eval_notes").unwrap();
}
