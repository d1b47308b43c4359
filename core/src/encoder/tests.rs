//! The encoder against sentence-transformers' own embeddings
//! (`tests/data/encoder/reference.json`, written by
//! `scripts/build-encoder reference`).

use std::sync::OnceLock;

use super::*;
use crate::{EngineConfig, ErrorKind};

/// Smallest cosine to the reference vector allowed for any sentence.
const MIN_COSINE: f32 = 0.9999;
/// Largest difference allowed in any coordinate: the reference is rounded
/// to 6 decimals (5e-7 by itself); the export measured 6.4e-7.
const MAX_ABS_DIFF: f32 = 1e-5;

/// The installed encoder, opened once for all tests; `None` (the test is
/// skipped, saying why) only when the asset or the ONNX Runtime library is
/// absent, and not even then under `DPTEXT_REQUIRE_ASSETS=1`.
fn encoder() -> Option<&'static SentenceEncoder> {
    static ENC: OnceLock<std::result::Result<SentenceEncoder, String>> = OnceLock::new();
    let opened = ENC.get_or_init(|| {
        let config = EngineConfig::new(crate::assets::resolve_dir(None));
        match SentenceEncoder::open(&config) {
            Ok(e) => Ok(e),
            Err(e) if e.kind() == ErrorKind::MissingAsset => Err(e.to_string()),
            Err(e) => panic!("the sentence encoder does not open: {e}"),
        }
    });
    match opened {
        Ok(e) => Some(e),
        Err(why) => {
            assert!(
                std::env::var("DPTEXT_REQUIRE_ASSETS").as_deref() != Ok("1"),
                "DPTEXT_REQUIRE_ASSETS=1 but {why}"
            );
            eprintln!("skipping: {why}");
            None
        }
    }
}

#[derive(Deserialize)]
struct Reference {
    dim: usize,
    items: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    text: String,
    tokens: usize,
    embedding: Vec<f32>,
}

fn reference() -> Reference {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/encoder/reference.json"
    );
    serde_json::from_str(&std::fs::read_to_string(p).expect(p)).expect(p)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn matches_sentence_transformers() {
    let Some(enc) = encoder() else { return };
    let reference = reference();
    assert_eq!(enc.dim(), reference.dim);
    assert!(reference.items.len() >= 16);
    let texts: Vec<&str> = reference.items.iter().map(|i| i.text.as_str()).collect();
    // One call with every length: rows are sorted and padded together.
    let got = enc.embed(&texts).unwrap();
    assert_eq!(got.len(), texts.len());
    let (mut min_cos, mut worst) = (f32::INFINITY, 0f32);
    for (item, v) in reference.items.iter().zip(&got) {
        assert_eq!(
            enc.ids(&item.text).unwrap().len(),
            item.tokens,
            "token count of {:?}",
            item.text
        );
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm} of {:?}", item.text);
        let c = cosine(v, &item.embedding);
        let d = max_abs_diff(v, &item.embedding);
        assert!(c >= MIN_COSINE, "cosine {c} for {:?}", item.text);
        assert!(d <= MAX_ABS_DIFF, "max abs diff {d} for {:?}", item.text);
        min_cos = min_cos.min(c);
        worst = worst.max(d);
    }
    eprintln!(
        "{} sentences: cosine min {min_cos:.7}, max abs diff {worst:.2e}",
        texts.len()
    );
    // A text's vector does not depend on its batch (padding is masked).
    for (text, v) in texts.iter().zip(&got).step_by(3) {
        let alone = enc.embed(&[text]).unwrap().remove(0);
        assert!(max_abs_diff(&alone, v) < 1e-6, "{text:?} alone");
    }
}

#[test]
fn truncates_at_256_tokens() {
    let Some(enc) = encoder() else { return };
    let long = "word ".repeat(1000);
    assert_eq!(enc.ids(&long).unwrap().len(), 256);
    let longer = format!("{long} and then something else entirely");
    let v = enc.embed(&[&long, &longer]).unwrap();
    assert!(
        max_abs_diff(&v[0], &v[1]) < 1e-6,
        "text past 256 tokens was read"
    );
}

#[test]
fn paraphrases_score_higher_than_unrelated_sentences() {
    let Some(enc) = encoder() else { return };
    let pairs = [
        (
            "The patient denies chest pain.",
            "The patient reports no pain in the chest.",
        ),
        (
            "She was discharged home in stable condition.",
            "She went home from the hospital, stable.",
        ),
        (
            "Take two tablets by mouth every morning.",
            "Swallow two pills each morning.",
        ),
    ];
    let unrelated = [
        "Stock markets fell after the central bank raised rates.",
        "The recipe calls for two cups of flour and an egg.",
        "Our football team won the championship last night.",
    ];
    let mut texts: Vec<&str> = pairs.iter().flat_map(|(a, b)| [*a, *b]).collect();
    texts.extend(unrelated);
    let v = enc.embed(&texts).unwrap();
    for (k, (a, b)) in pairs.iter().enumerate() {
        let para = cosine(&v[2 * k], &v[2 * k + 1]);
        for (u, text) in unrelated.iter().enumerate() {
            let other = cosine(&v[2 * k], &v[2 * pairs.len() + u]);
            assert!(
                para > other + 0.2,
                "{a:?} ~ {b:?}: {para} is not clearly above {other} for {text:?}"
            );
        }
        assert!(para > 0.6, "{a:?} ~ {b:?}: {para}");
    }
}

#[test]
fn no_texts_no_vectors() {
    let Some(enc) = encoder() else { return };
    assert!(enc.embed(&[]).unwrap().is_empty());
}

#[test]
fn missing_asset_says_how_to_build_it() {
    let dir = std::env::temp_dir().join(format!("dptext-encoder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let err = SentenceEncoder::open(&EngineConfig::new(dir.clone())).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(err.kind(), ErrorKind::MissingAsset, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("scripts/build-encoder"), "{msg}");
    assert!(msg.contains(SENTENCE_ENCODER_DIR), "{msg}");
}

#[test]
fn shareable_between_threads() {
    fn check<T: Send + Sync>() {}
    check::<SentenceEncoder>();
}

#[test]
fn cosine_of_simple_vectors() {
    assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-7);
    assert!(cosine(&[1.0, 0.0], &[0.0, 3.0]).abs() < 1e-7);
    assert!((cosine(&[1.0, 1.0], &[-1.0, -1.0]) + 1.0).abs() < 1e-7);
    assert_eq!(cosine(&[0.0, 0.0], &[1.0, 2.0]), 0.0);
    assert_eq!(cosine(&[1.0, 2.0], &[0.0, 0.0]), 0.0);
    assert_eq!(cosine(&[], &[]), 0.0);
}
