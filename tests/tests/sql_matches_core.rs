//! The extension, the CLI and the core compute the same thing: with the same
//! seed, a value sanitized in SQL equals the same value sanitized by the
//! `dptext` binary and by the core library directly.

use std::io::Write;
use std::process::{Command, Stdio};

use dptext_core::mechanisms::MechanismSpec;
use dptext_core::rng::Secret;
use dptext_core::{Engine, EngineConfig, RandomMode};

#[path = "../common/psql.rs"]
mod common;

use common::database;

const NOTES: [&str; 4] = [
    "The patient was admitted with chest pain and a mild fever.",
    "Dr. Smith prescribed ibuprofen 400 mg; follow-up in two weeks.",
    "Kathryn Herrera, a 72-year-old woman from Kingston, reports dizziness.",
    "Пациент 🙂 reports NAUSEA and vomiting!",
];

/// psql (quiet) on `db`: its output without the last newline.
fn psql(db: &str, sql: &str) -> String {
    common::psql(db, sql, true)
        .trim_end_matches('\n')
        .to_string()
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn sql_santext_plus(db: &str, seed: u64, note: &str) -> String {
    psql(
        db,
        &format!(
            "SET dptext.seed = {seed}; SELECT santext_plus({}, 3, p => 0.3, w => 0.9)",
            quote(note)
        ),
    )
}

fn cli(seed: u64, notes: &[&str]) -> Vec<String> {
    let bin = env!("CARGO_MANIFEST_DIR").to_string() + "/../target/release/dptext";
    let bin = if std::path::Path::new(&bin).exists() {
        bin
    } else {
        "dptext".to_string()
    };
    let mut child = Command::new(&bin)
        .args([
            "sanitize",
            "--mechanism",
            "santext_plus",
            "--eps",
            "3",
            "--p",
            "0.3",
            "--w",
            "0.9",
        ])
        .args(["--seed", &seed.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    for n in notes {
        writeln!(stdin, "{n}").expect("write");
    }
    drop(stdin);
    let out = child.wait_with_output().expect("dptext runs");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn sql_cli_and_core_agree_under_a_seed() {
    let Some(db) = database() else { return };
    let engine = Engine::new(EngineConfig::new(dptext_core::assets::resolve_dir(None)));
    let spec = MechanismSpec::parse(
        "santext_plus",
        &serde_json::json!({"eps": 3, "p": 0.3, "w": 0.9}),
    )
    .unwrap();
    let from_cli = cli(99, &NOTES);
    assert_eq!(from_cli.len(), NOTES.len());
    for (note, cli_out) in NOTES.iter().zip(&from_cli) {
        let sql_out = sql_santext_plus(&db, 99, note);
        let core_out = engine
            .sanitize(&spec, note, &RandomMode::Seeded(99))
            .unwrap()
            .text;
        assert_eq!(sql_out, core_out, "SQL and core differ on {note:?}");
        assert_eq!(&sql_out, cli_out, "SQL and CLI differ on {note:?}");
        assert_ne!(&sql_out, note);
    }
}

#[test]
fn keyed_sql_output_is_stable_across_sessions() {
    let Some(db) = database() else { return };
    let q =
        "SET dptext.key = 'integration test key'; SELECT santext('The patient has a fever.', 2)";
    let a = psql(&db, q);
    let b = psql(&db, q);
    assert_eq!(a, b, "two sessions with the same key must agree");
    let other = psql(
        &db,
        "SET dptext.key = 'another integration key'; SELECT santext('The patient has a fever.', 2)",
    );
    assert_ne!(a, other);
}

#[test]
fn materialized_view_refresh_is_repeatable_under_a_key() {
    let Some(db) = database() else { return };
    let out = psql(
        &db,
        "SET dptext.key = 'materialized view test key';
         DROP MATERIALIZED VIEW IF EXISTS it_view; DROP TABLE IF EXISTS it_src;
         CREATE TABLE it_src AS SELECT i AS id, 'note number ' || i || ' mentions fever' AS note FROM generate_series(1, 50) i;
         CREATE MATERIALIZED VIEW it_view AS SELECT id, santext(note, 3) AS note FROM it_src;
         CREATE TABLE it_before AS SELECT * FROM it_view;
         REFRESH MATERIALIZED VIEW it_view;
         SELECT count(*) FILTER (WHERE a.note = b.note) || '/' || count(*) || '/' ||
                count(*) FILTER (WHERE a.note <> s.note)
           FROM it_view a JOIN it_before b USING (id) JOIN it_src s USING (id);
         DROP TABLE it_before; DROP MATERIALIZED VIEW it_view; DROP TABLE it_src;",
    );
    assert_eq!(out.lines().last(), Some("50/50/50"), "{out}");
}

#[test]
fn keyed_deidentify_agrees_between_sql_and_core() {
    // Surrogate draws (core/src/mechanisms/deidentify/surrogates) under a key: the
    // extension and the core must draw the same names, places and dates.
    let Some(db) = database() else { return };
    let engine = Engine::new(EngineConfig::new(dptext_core::assets::resolve_dir(None)));
    let key = "deidentify integration key";
    for (strategy, note) in [("full_entity", NOTES[2]), ("word_by_word", NOTES[1])] {
        let spec = MechanismSpec::parse(
            "deidentify",
            &serde_json::json!({"strategy": strategy, "p": 1.0}),
        )
        .unwrap();
        let core_out = engine
            .sanitize(&spec, note, &RandomMode::Keyed(Secret::new(key)))
            .unwrap()
            .text;
        let sql_out = psql(
            &db,
            &format!(
                "SET dptext.key = {}; SELECT deidentify({}, strategy => {})",
                quote(key),
                quote(note),
                quote(strategy)
            ),
        );
        assert_eq!(sql_out, core_out, "{strategy} on {note:?}");
        assert_ne!(&sql_out, note);
    }
}
