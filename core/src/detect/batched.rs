//! [`Detector::detect_many`] against [`Detector::detect`]: every text's
//! spans are the same whatever else shares its model calls.

use super::*;
use crate::cancel::{Flag, Scope};

/// Short notes, a note of several windows, lines in capitals, an empty
/// value, unicode, a line longer than a window, and clinical notes whole
/// and cut into short values, as a column of a table would hold them.
fn texts() -> Vec<String> {
    let filler = "the patient reported mild pain and was given fluids. ".repeat(140);
    let mut out = vec![
        "Please contact John Smith at john.smith@example.com.".to_string(),
        String::new(),
        "   \n\n".to_string(),
        "KOWALCZYK, HELENA M\nDOB: 04/11/1931\nATTENDING: OKAFOR, CHINEDU, MD\n".to_string(),
        "Café owner Zoë Müller lives in Zürich. 🙂 東京 clinic, MRN 8249813.".to_string(),
        format!("{filler}Discharged by Maria Gonzalez."),
        format!("Seen by Dr. Per Lindqvist.\n{filler}\nFollow-up with Maria Lopez in Springfield."),
        "ok".to_string(),
        "He lives at 42 Oak Street, Springfield, IL 62704.".to_string(),
    ];
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/clinical");
    for name in ["a01.txt", "a02.txt", "a03.txt"] {
        let marked = std::fs::read_to_string(format!("{dir}/{name}")).expect("clinical note");
        let note = annotated::parse(&marked).expect("markup");
        out.extend(
            note.text
                .split("\n\n")
                .filter(|p| !p.trim().is_empty())
                .map(str::to_string),
        );
        out.push(note.text);
    }
    out
}

type Found = Vec<(usize, usize, Label, Source)>;

fn found(spans: &[Span]) -> Found {
    spans
        .iter()
        .map(|s| (s.start, s.end, s.label, s.source))
        .collect()
}

/// Every text's spans from `detect_many` are `detect`'s with one row a
/// model call (no padding at all), scores included: a row padded to a
/// longer neighbour's length is masked, and its probabilities do not move.
fn compare(d: &Detector, texts: &[&str], rows: usize) {
    d.model().set_batch(1);
    let alone: Vec<Vec<Span>> = texts.iter().map(|t| d.detect(t).expect("detect")).collect();
    d.model().set_batch(rows);
    let many = d.detect_many(texts);
    assert_eq!(many.len(), texts.len());
    for ((t, m), alone) in texts.iter().zip(many).zip(alone) {
        let m = m.expect("detect_many");
        assert_eq!(found(&m), found(&alone), "batch {rows}: {t:?}");
        assert_eq!(m, alone, "batch {rows}: scores of {t:?}");
    }
}

#[test]
fn detect_many_finds_what_detect_finds() {
    let Some(d) = crate::assets::load_or_skip(|dir| Detector::load(dir, 1)) else {
        return;
    };
    let owned = texts();
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
    for rows in [4, 32] {
        compare(&d, &texts, rows);
    }
    // The custom recognizers' path, and a batch holding one text twice.
    d.set_custom(std::sync::Arc::new(
        custom::Custom::from_json(
            r#"{"threshold": 0.5, "allow": ["Springfield"],
                "recognizers": [{"name": "ward", "label": "ID", "pattern": "\\bMRN [0-9]+\\b"}]}"#,
        )
        .expect("recognizers"),
    ));
    compare(&d, &[texts[5], texts[0], texts[5], texts[4]], 8);
}

#[test]
fn a_cancel_stops_every_value() {
    let Some(d) = crate::assets::load_or_skip(|dir| Detector::load(dir, 1)) else {
        return;
    };
    let flag = Flag::new();
    flag.cancel();
    let _scope = Scope::enter(flag.hook());
    let out = d.detect_many(&["John Smith was seen.", "", "Maria Lopez"]);
    assert_eq!(out.len(), 3);
    for r in out {
        assert!(matches!(r, Err(crate::Error::Cancelled)), "{r:?}");
    }
}

#[test]
fn the_engine_holds_each_value_to_the_limit() {
    let mut config = crate::EngineConfig::new(crate::assets::resolve_dir(None));
    config.max_detect_bytes = 64;
    let engine = crate::Engine::new(config);
    let long = "John Smith was seen. ".repeat(10);
    let texts = [
        "Call John Smith.",
        long.as_str(),
        "Maria Lopez, 42 Oak Street",
    ];
    let Some(out) = crate::assets::load_or_skip(|_| engine.detect_many(&texts)) else {
        return;
    };
    assert_eq!(out.len(), 3);
    assert!(matches!(out[1], Err(crate::Error::InputTooLarge { .. })));
    for i in [0, 2] {
        let alone = engine.detect(texts[i]).expect("detect");
        let batched = out[i].as_ref().expect("within the limit");
        assert_eq!(found(batched), found(&alone), "{}", texts[i]);
    }
}
