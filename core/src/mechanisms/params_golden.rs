//! The canonical parameter strings ([`super::Mechanism::params`]) of
//! today's mechanisms, byte for byte.
//!
//! Keyed randomness derives each value's stream from the mechanism's name
//! and this string, so a changed string changes every keyed output of a
//! rule (a masked read, a stored output, a sanitized copy) although the
//! rule did not change. The strings below were taken from the code before
//! the strings moved into the specs; they may only change together with a
//! note in the changelog that keyed outputs change.

use super::EmbeddingChoice;
use super::MechanismSpec;
use crate::assets::load_or_skip;
use crate::{Engine, EngineConfig};

/// (mechanism, JSON parameters, canonical string). `{glove}` and
/// `{wordpiece}` stand for the installed embedding sets' names.
const GOLDEN: &[(&str, &str, &str)] = &[
    ("santext", r#"{"eps": 3}"#, "eps=3.0;embedding={glove}"),
    ("santext", r#"{"eps": 0.1}"#, "eps=0.1;embedding={glove}"),
    (
        "santext",
        r#"{"eps": 2.5, "embedding": "wordpiece"}"#,
        "eps=2.5;embedding={wordpiece}",
    ),
    (
        "santext_plus",
        r#"{"eps": 3}"#,
        "eps=3.0;p=0.3;w=0.9;embedding={glove}",
    ),
    (
        "santext_plus",
        r#"{"eps": 1e-3, "p": 0.55, "w": 1}"#,
        "eps=0.001;p=0.55;w=1.0;embedding={glove}",
    ),
    (
        "custext",
        r#"{"eps": 1}"#,
        "eps=1.0;k=20;mapping=balanced;metric=euclidean;level=record;keep_stopwords=true;embedding={glove}",
    ),
    (
        "custext",
        r#"{"eps": 2, "level": "token", "keep_stopwords": false}"#,
        "eps=2.0;k=20;mapping=balanced;metric=euclidean;level=token;keep_stopwords=false;embedding={glove}",
    ),
    (
        "deidentify",
        r#"{}"#,
        "strategy=full_entity;p=1.0;consistent=false",
    ),
    (
        "deidentify",
        r#"{"strategy": "redact", "p": 0.5, "consistent": true}"#,
        "strategy=redact;p=0.5;consistent=true",
    ),
    (
        "deidentify",
        r#"{"operators": {"DATE": "shift", "ID": "redact"}, "shift_days": 30, "whole": true}"#,
        "strategy=full_entity;p=1.0;consistent=false;operators=DATE:shift,ID:redact;whole=true;shift_days=30",
    ),
    (
        "ndd",
        r#"{}"#,
        "mode=substitutive,candidates=8,mu=0.9,divergence=kl",
    ),
    (
        "ndd",
        r#"{"mode": "generative", "candidates": 4, "mu": 0.5, "divergence": "hellinger"}"#,
        "mode=generative,candidates=4,mu=0.5,divergence=hellinger",
    ),
    (
        "ndd",
        r#"{"operators": {"DATE": "shift"}, "shift_days": 90}"#,
        "mode=substitutive,candidates=8,mu=0.9,divergence=kl;operators=DATE:shift;shift_days=90",
    ),
    (
        "chain",
        r#"{"stages": [{"mechanism": "deidentify"}, {"mechanism": "santext_plus", "params": {"eps": 3}}]}"#,
        "deidentify(strategy=full_entity;p=1.0;consistent=false) THEN santext_plus(eps=3.0;p=0.3;w=0.9;embedding={glove})",
    ),
];

#[test]
fn canonical_parameter_strings_are_unchanged() {
    let Some(engine) = load_or_skip(|dir| {
        let e = Engine::new(EngineConfig::new(dir.to_path_buf()));
        e.vocabulary(EmbeddingChoice::Glove)?;
        e.vocabulary(EmbeddingChoice::Wordpiece)?;
        Ok(e)
    }) else {
        return;
    };
    let name = |which| {
        engine
            .vocabulary(which)
            .map(|v| v.embeddings().name().to_string())
            .unwrap()
    };
    let (glove, wordpiece) = (
        name(EmbeddingChoice::Glove),
        name(EmbeddingChoice::Wordpiece),
    );
    let mut wrong = Vec::new();
    for (mechanism, params, expected) in GOLDEN {
        let json: serde_json::Value = serde_json::from_str(params).unwrap();
        let spec = MechanismSpec::parse(mechanism, &json)
            .unwrap_or_else(|e| panic!("{mechanism} {params}: {e}"));
        let built = engine
            .build(&spec)
            .unwrap_or_else(|e| panic!("{mechanism} {params}: {e}"));
        let expected = expected
            .replace("{glove}", &glove)
            .replace("{wordpiece}", &wordpiece);
        if built.params() != expected {
            wrong.push(format!(
                "{mechanism} {params}\n  now:    {}\n  golden: {expected}",
                built.params()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "changed canonical strings:\n{}",
        wrong.join("\n")
    );
}
