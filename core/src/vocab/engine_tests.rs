//! A released vocabulary used by the mechanisms, over the installed GloVe
//! words (skipped without assets, unless `DPTEXT_REQUIRE_ASSETS=1`).

use std::collections::HashSet;

use super::*;
use crate::assets::load_or_skip;
use crate::mechanisms::{EmbeddingChoice, MechanismSpec};
use crate::text::Segmented;
use crate::{Engine, EngineConfig, RandomMode};

const NOTES: [&str; 4] = [
    "the patient reported chest pain and fever",
    "patient denies fever, reports cough",
    "chest x-ray shows no acute disease",
    "the patient was admitted for pneumonia",
];

/// An engine over the installed assets with the vocabulary `notes`
/// registered: 2,000 values cycling over [`NOTES`], and one value holding
/// a word no other value has.
fn engine() -> Option<(Engine, VocabularyAsset)> {
    let engine = load_or_skip(|dir| {
        let e = Engine::new(EngineConfig::new(dir.to_path_buf()));
        e.vocabulary(EmbeddingChoice::Glove)?;
        Ok(e)
    })?;
    let mut values: Vec<&str> = (0..2000).map(|i| NOTES[i % 4]).collect();
    values.push("a wombat");
    let asset = release(&engine, &values);
    engine.register_vocabulary(asset.clone()).unwrap();
    Some((engine, asset))
}

/// The vocabulary `notes` released from `values` over the GloVe words
/// (eps 1, delta 1e-5, seeded).
fn release(engine: &Engine, values: &[&str]) -> VocabularyAsset {
    let glove = engine.vocabulary(EmbeddingChoice::Glove).unwrap();
    let params = ReleaseParams {
        eps: 1.0,
        delta: 1e-5,
        max_words_per_value: 16,
        noise: Noise::Laplace,
    };
    let mut c = Counter::new(glove.embeddings(), params).unwrap();
    for v in values {
        c.add(v);
    }
    let r = c.finish(&RandomMode::Seeded(1)).unwrap();
    VocabularyAsset::new("notes", "unit test", &params, r, glove.embeddings()).unwrap()
}

fn words_of(text: &str) -> Vec<String> {
    let seg = Segmented::new(text);
    seg.words()
        .map(|w| seg.word_str(w).to_lowercase())
        .collect()
}

#[test]
fn the_release_keeps_the_column_words_and_drops_the_lone_one() {
    let Some((_, asset)) = engine() else { return };
    for w in ["patient", "fever", "chest", "pneumonia", "the"] {
        assert!(asset.words.iter().any(|x| x == w), "{w}: {:?}", asset.words);
    }
    assert!(!asset.words.iter().any(|x| x == "wombat"));
    // "patient" is in three notes of four: the most frequent word.
    assert_eq!(asset.words[0], "patient");
}

#[test]
fn mechanisms_draw_only_vocabulary_words() {
    let Some((engine, asset)) = engine() else {
        return;
    };
    let allowed: HashSet<&str> = asset.words.iter().map(String::as_str).collect();
    for (name, params) in [
        (
            "santext",
            serde_json::json!({"eps": 3, "vocabulary": "notes"}),
        ),
        (
            "santext_plus",
            serde_json::json!({"eps": 3, "vocabulary": "notes", "p": 1.0}),
        ),
        (
            "custext",
            serde_json::json!({"eps": 2, "k": 5, "keep_stopwords": false, "vocabulary": "notes"}),
        ),
    ] {
        let spec = MechanismSpec::parse(name, &params).unwrap();
        assert_eq!(spec.vocabulary(), Some("notes"));
        for seed in 0..20 {
            let out = engine
                .sanitize(
                    &spec,
                    "Wombat patient in Paris with fever",
                    &RandomMode::Seeded(seed),
                )
                .unwrap();
            for w in words_of(&out.text) {
                assert!(allowed.contains(w.as_str()), "{name}: {w} in {}", out.text);
            }
            assert_eq!(out.cost.vocabulary, Some(asset.cost()), "{name}");
            assert!(out.cost.output_set_size <= asset.words.len(), "{name}");
            let json = serde_json::to_value(&out.cost).unwrap();
            assert_eq!(json["vocabulary"]["name"], "notes");
        }
    }
}

#[test]
fn without_a_vocabulary_nothing_changes() {
    let Some((engine, _)) = engine() else { return };
    let spec = MechanismSpec::parse("santext", &serde_json::json!({"eps": 3})).unwrap();
    let m = engine.build(&spec).unwrap();
    // The keyed stream's context, as before vocabularies existed.
    assert_eq!(m.params(), "eps=3.0;embedding=glove-6b-50d");
    assert_eq!(
        spec.params_json(),
        serde_json::json!({"eps": 3.0, "embedding": "glove"})
    );
    let out = engine
        .sanitize(&spec, "fever", &RandomMode::Seeded(1))
        .unwrap();
    assert!(serde_json::to_value(&out.cost)
        .unwrap()
        .get("vocabulary")
        .is_none());
    let with = spec.with_vocabulary(Some("notes".into())).unwrap();
    let m = engine.build(&with).unwrap();
    assert!(
        m.params()
            .starts_with("eps=3.0;embedding=glove-6b-50d@notes-"),
        "{}",
        m.params()
    );
}

#[test]
fn unknown_or_misplaced_vocabularies_are_errors() {
    let Some((engine, _)) = engine() else { return };
    let spec = MechanismSpec::parse(
        "santext",
        &serde_json::json!({"eps": 3, "vocabulary": "nope"}),
    )
    .unwrap();
    let Err(e) = engine.build(&spec) else {
        panic!("an unknown vocabulary built")
    };
    assert!(
        e.to_string().contains("no vocabulary named \"nope\""),
        "{e}"
    );
    let wp = MechanismSpec::parse(
        "santext",
        &serde_json::json!({"eps": 3, "vocabulary": "notes", "embedding": "wordpiece"}),
    )
    .unwrap_err();
    assert!(wp.to_string().contains("\"vocabulary\""), "{wp}");
    let bad = MechanismSpec::parse(
        "santext",
        &serde_json::json!({"eps": 3, "vocabulary": "../x"}),
    )
    .unwrap_err();
    assert!(bad.to_string().contains("not a vocabulary name"), "{bad}");
    let nd = MechanismSpec::parse("deidentify", &serde_json::json!({}))
        .unwrap()
        .with_vocabulary(Some("notes".into()))
        .unwrap_err();
    assert!(nd.to_string().contains("takes no vocabulary"), "{nd}");
}

#[test]
fn a_rule_names_its_vocabulary() {
    let rule = crate::rules::parse_column_label(
        "MASKED WITH santext(eps => 3, vocabulary => notes_vocab)",
    )
    .unwrap();
    assert_eq!(rule.spec.vocabulary(), Some("notes_vocab"));
    assert_eq!(
        rule.params(),
        serde_json::json!({"eps": 3.0, "embedding": "glove", "vocabulary": "notes_vocab"})
    );
    let again = crate::rules::parse_column_label(&rule.to_label()).unwrap();
    assert_eq!(again.spec, rule.spec);
}

#[test]
fn a_vocabulary_registered_again_replaces_the_built_mechanisms() {
    let Some((engine, asset)) = engine() else {
        return;
    };
    let spec = MechanismSpec::parse(
        "santext",
        &serde_json::json!({"eps": 3, "vocabulary": "notes"}),
    )
    .unwrap();
    let first = engine.mechanism(&spec).unwrap();
    assert!(
        std::sync::Arc::ptr_eq(&first, &engine.mechanism(&spec).unwrap()),
        "the same spec is built once"
    );
    // The same name released again with other words: only those are drawn.
    let again = release(&engine, &["wombat kangaroo"; 2000]);
    assert_ne!(again.words, asset.words);
    engine.register_vocabulary(again.clone()).unwrap();
    assert!(!std::sync::Arc::ptr_eq(
        &first,
        &engine.mechanism(&spec).unwrap()
    ));
    let allowed: HashSet<&str> = again.words.iter().map(String::as_str).collect();
    for seed in 0..10 {
        let out = engine
            .sanitize(&spec, "patient with fever", &RandomMode::Seeded(seed))
            .unwrap();
        for w in words_of(&out.text) {
            assert!(allowed.contains(w.as_str()), "{w} is not in {allowed:?}");
        }
    }
}
