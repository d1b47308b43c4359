//! Statistical and property tests of SanText and SanText+.
//!
//! Synthetic vocabularies keep these fast and independent of assets; the
//! tests at the end repeat the key checks on the real GloVe vectors when
//! they are installed (and fail instead of skipping when
//! `DPTEXT_REQUIRE_ASSETS=1`, as the project's test command sets).

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::embeddings::tests::synthetic;
use crate::embeddings::Embeddings;
use crate::text::Segmented;
use crate::{Engine, EngineConfig, RandomMode};

fn vocab(n: usize) -> Arc<Vocabulary> {
    Arc::new(Vocabulary::new(synthetic(n, 8, 42), 8 << 20))
}

/// Upper critical value of chi-square with `df` degrees of freedom at
/// significance 0.001 (Wilson-Hilferty approximation, z = 3.090).
fn chi2_critical_001(df: usize) -> f64 {
    let k = df as f64;
    let z = 3.090;
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

/// Draws `n` samples for input `x` and runs a chi-square goodness-of-fit
/// test against the exact distribution. Outputs with an expected count of at
/// least 5 get their own bin; all others share one bin. Returns
/// (statistic, critical value at 0.001).
fn chi_square(s: &ExpSampler, x: u32, eps: f64, n: usize, seed: u64) -> (f64, f64) {
    let probs = s.probabilities(x, eps);
    let start = s.output_set().start;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut counts = vec![0usize; probs.len()];
    for _ in 0..n {
        counts[(s.sample(x, eps, &mut rng) - start) as usize] += 1;
    }
    let (mut stat, mut bins) = (0.0, 0usize);
    let (mut rest_obs, mut rest_exp) = (0.0, 0.0);
    for (c, p) in counts.iter().zip(&probs) {
        let e = p * n as f64;
        if e >= 5.0 {
            stat += (*c as f64 - e).powi(2) / e;
            bins += 1;
        } else {
            rest_obs += *c as f64;
            rest_exp += e;
        }
    }
    if rest_exp > 0.0 {
        stat += (rest_obs - rest_exp).powi(2) / rest_exp;
        bins += 1;
    }
    (stat, chi2_critical_001(bins.saturating_sub(1).max(1)))
}

#[test]
fn eps_zero_is_uniform() {
    let v = vocab(500);
    let m = SanText::new_allowing_zero(v, 0.0).unwrap();
    for x in [0, 17, 499] {
        for p in m.sampler().probabilities(x, 0.0) {
            assert!((p - 1.0 / 500.0).abs() < 1e-12);
        }
    }
}

#[test]
fn self_probability_grows_with_eps() {
    let v = vocab(2000);
    let s = v.sampler(0).unwrap();
    for x in [3u32, 1000, 1999] {
        let mut last = 0.0;
        for eps in [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0] {
            let p = s.probabilities(x, eps)[x as usize];
            assert!(p > last, "eps {eps}: {p} <= {last}");
            last = p;
        }
        assert!(last > 0.99, "Pr[M(x)=x] at eps 64 is {last}");
    }
}

#[test]
fn distributions_satisfy_metric_ldp_exactly() {
    let v = vocab(1500);
    let s = v.sampler(0).unwrap();
    let emb = v.embeddings();
    for eps in [0.5, 1.0, 3.0, 5.0] {
        for (x, x2) in [(0u32, 1u32), (10, 900), (1499, 3), (700, 701)] {
            let px = s.probabilities(x, eps);
            let px2 = s.probabilities(x2, eps);
            let bound = (eps * f64::from(emb.distance(x, x2))).exp() * (1.0 + 1e-9);
            for (a, b) in px.iter().zip(&px2) {
                assert!(a / b <= bound, "eps {eps} ({x},{x2}): {} > {bound}", a / b);
            }
        }
    }
}

#[test]
fn samples_follow_the_computed_distribution() {
    // More outputs than the cached top, so the table and the rejection path
    // are both used (checked below).
    let n = 2 * super::exponential::TOP + 500;
    let v = vocab(n);
    let s = v.sampler(0).unwrap();
    assert!(
        s.top_mass(0, 1.0) < 0.9,
        "the rejection path must carry mass"
    );
    for (i, eps) in [1.0, 3.0, 5.0].into_iter().enumerate() {
        for x in [0u32, n as u32 - 1] {
            let (stat, crit) = chi_square(&s, x, eps, 40_000, 100 + i as u64);
            assert!(stat < crit, "eps {eps}, x {x}: chi2 {stat:.1} >= {crit:.1}");
        }
    }
}

#[test]
fn empirical_ratio_respects_the_bound() {
    // Statistical check of the LDP ratio on samples: for outputs seen often
    // enough, the empirical ratio stays below exp(eps d) times a 3-sigma margin.
    let v = vocab(300);
    let s = v.sampler(0).unwrap();
    let (x, x2, eps, n) = (5u32, 6u32, 2.0, 200_000);
    let bound = (eps * f64::from(v.embeddings().distance(x, x2))).exp();
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let mut cx = [0f64; 300];
    let mut cx2 = [0f64; 300];
    for _ in 0..n {
        cx[s.sample(x, eps, &mut rng) as usize] += 1.0;
        cx2[s.sample(x2, eps, &mut rng) as usize] += 1.0;
    }
    for y in 0..300 {
        if cx[y] >= 400.0 && cx2[y] >= 400.0 {
            let ratio = cx[y] / cx2[y];
            let margin = 1.0 + 3.0 * (1.0 / cx[y] + 1.0 / cx2[y]).sqrt();
            assert!(
                ratio <= bound * margin,
                "y {y}: {ratio} > {bound} * {margin}"
            );
        }
    }
}

#[test]
fn santext_plus_keeps_non_sensitive_with_probability_one_minus_p() {
    let v = vocab(1000);
    let (p, n) = (0.3, 20_000);
    let m = SanTextPlus::new(v.clone(), 2.0, p, 0.9).unwrap();
    // Row 0 is the most frequent word: non-sensitive.
    assert!(!m.is_sensitive(0) && m.is_sensitive(999));
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let mut kept = 0;
    for _ in 0..n {
        let out = m.sanitize("w0", &mut rng, &RandomMode::Os).unwrap();
        if out.text == "w0" {
            kept += 1;
        } else {
            let id = v.embeddings().id(&out.text).unwrap();
            assert!(m.is_sensitive(id), "replacement {} outside V_P", out.text);
        }
    }
    // 4.5 standard deviations of a binomial proportion.
    let share = kept as f64 / n as f64;
    let tol = 4.5 * (p * (1.0 - p) / n as f64).sqrt();
    assert!(
        (share - (1.0 - p)).abs() < tol,
        "kept {share}, want {} ± {tol}",
        1.0 - p
    );
}

#[test]
fn santext_plus_sensitive_words_are_always_redrawn_into_vp() {
    let v = vocab(1000);
    let m = SanTextPlus::new(v.clone(), 50.0, 0.0, 0.5).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    for _ in 0..2000 {
        // p = 0: non-sensitive words always kept.
        assert_eq!(
            m.sanitize("w10", &mut rng, &RandomMode::Os).unwrap().text,
            "w10"
        );
        let out = m.sanitize("w990", &mut rng, &RandomMode::Os).unwrap();
        assert!(m.is_sensitive(v.embeddings().id(&out.text).unwrap()));
    }
    let probs = m.sampler().probabilities(10, 1.0);
    assert_eq!(probs.len(), 500);
}

#[test]
fn santext_plus_sampling_matches_restricted_distribution() {
    let n = 2 * super::exponential::TOP + 1000;
    let v = vocab(n);
    let m = SanTextPlus::new(v, 3.0, 0.3, 0.5).unwrap();
    assert!(m.sampler().top_mass(5, 3.0) < 0.99);
    // Input from V_N and from V_S, output set V_P = the upper half.
    for x in [5u32, n as u32 - 10] {
        let (stat, crit) = chi_square(m.sampler(), x, 3.0, 40_000, 77);
        assert!(stat < crit, "x {x}: chi2 {stat:.1} >= {crit:.1}");
    }
}

#[test]
fn parameters_are_validated() {
    let v = vocab(100);
    for eps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = SanText::new(v.clone(), eps).unwrap_err();
        assert!(e.to_string().contains("\"eps\""), "{e}");
    }
    for bad in [-0.1, 1.1, f64::NAN] {
        assert!(SanTextPlus::new(v.clone(), 1.0, bad, 0.9).is_err());
        assert!(SanTextPlus::new(v.clone(), 1.0, 0.3, bad).is_err());
    }
    // w so small that no word of 100 is sensitive.
    let e = SanTextPlus::new(v, 1.0, 0.3, 0.001).unwrap_err();
    assert!(e.to_string().contains("\"w\""), "{e}");
    let json = serde_json::json!({"eps": 1, "bogus": 2});
    assert!(MechanismSpec::parse("santext", &json).is_err());
    assert!(matches!(
        MechanismSpec::parse("nope", &serde_json::json!({"eps": 1})),
        Err(crate::Error::UnknownMechanism(_))
    ));
    assert!(MechanismSpec::parse("santext_plus", &serde_json::json!({"eps": 1, "w": 0})).is_err());
    assert!(MechanismSpec::parse(
        "santext",
        &serde_json::json!({"eps": 1, "embedding": "bert"})
    )
    .is_err());
}

#[test]
fn sanitize_keeps_layout_and_counts_cost() {
    let v = vocab(200);
    let m = SanText::new(v, 2.0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let text = "W1, w2!  Zzzunknown\t🙂 W3.";
    let out = m.sanitize(text, &mut rng, &RandomMode::Os).unwrap();
    let a = Segmented::new(text);
    let b = Segmented::new(&out.text);
    assert_eq!(a.len(), b.len());
    // Gaps are copied byte for byte.
    assert!(out.text.contains(", ") && out.text.contains("!  ") && out.text.contains("\t🙂 "));
    assert!(out.text.ends_with('.'));
    // Title case carried over.
    assert!(out.text.starts_with('W'));
    assert_eq!(out.cost.tokens, 4);
    assert_eq!(out.cost.oov_tokens, 1);
    assert!(out.cost.worst_case_eps > 0.0);
    for empty in ["", "   ", "?!…"] {
        let o = m.sanitize(empty, &mut rng, &RandomMode::Os).unwrap();
        assert_eq!(o.text, empty);
        assert_eq!(o.cost.tokens, 0);
    }
}

#[test]
fn wordpiece_vocabulary_joins_pieces() {
    let words: Vec<String> = ["the", "play", "##ing", "run", "##s", "walk"]
        .map(String::from)
        .to_vec();
    let vectors = (0..6 * 2).map(|i| i as f32).collect();
    let e = Embeddings::from_parts(
        "wp",
        crate::embeddings::VocabKind::Wordpiece,
        words,
        vectors,
        2,
    )
    .unwrap();
    let v = Arc::new(Vocabulary::new(e, 1 << 20));
    let m = SanText::new(v, 1000.0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    // At a huge eps every piece maps to itself, so re-assembly is exact.
    let out = m
        .sanitize("Playing runs", &mut rng, &RandomMode::Os)
        .unwrap();
    assert_eq!(out.text, "Playing runs");
    assert_eq!(out.cost.tokens, 4);
}

fn engine_with_synthetic_glove() -> (Engine, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "dptext-engine-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let g = dir.join(crate::assets::GLOVE_DIR);
    std::fs::create_dir_all(&g).unwrap();
    let e = synthetic(300, 8, 1);
    let words: String = (0..300).map(|i| format!("w{i}\n")).collect();
    std::fs::write(g.join("words.txt"), words).unwrap();
    let bytes: Vec<u8> = (0..300u32)
        .flat_map(|i| e.vector(i).to_vec())
        .flat_map(f32::to_le_bytes)
        .collect();
    std::fs::write(g.join("vectors.f32"), bytes).unwrap();
    std::fs::write(
        g.join("meta.json"),
        r#"{"name":"glove-6b-50d","kind":"word","rows":300,"dim":8,"source":"synthetic"}"#,
    )
    .unwrap();
    (Engine::new(EngineConfig::new(dir.clone())), dir)
}

#[test]
fn seeded_and_keyed_modes_are_deterministic() {
    let (engine, dir) = engine_with_synthetic_glove();
    let spec = MechanismSpec::parse("santext", &serde_json::json!({"eps": 1.0})).unwrap();
    let text = "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12";
    let a = engine
        .sanitize(&spec, text, &RandomMode::Seeded(11))
        .unwrap();
    let b = engine
        .sanitize(&spec, text, &RandomMode::Seeded(11))
        .unwrap();
    let c = engine
        .sanitize(&spec, text, &RandomMode::Seeded(12))
        .unwrap();
    assert_eq!(a.text, b.text);
    assert_ne!(a.text, c.text);
    let key = RandomMode::from_settings(None, Some(b"a secret of 16+ bytes")).unwrap();
    let k1 = engine.sanitize(&spec, text, &key).unwrap();
    assert_eq!(k1.text, engine.sanitize(&spec, text, &key).unwrap().text);
    // Different parameters use a different stream.
    let spec2 = MechanismSpec::parse("santext", &serde_json::json!({"eps": 1.0000001})).unwrap();
    assert_ne!(k1.text, engine.sanitize(&spec2, text, &key).unwrap().text);
    // Input limit.
    let mut small = engine.config().clone();
    small.max_input_bytes = 4;
    let e2 = Engine::new(small);
    assert!(matches!(
        e2.sanitize(&spec, "w1 w2", &key),
        Err(crate::Error::InputTooLarge { .. })
    ));
    // Missing embedding set: a clear error naming the fetch command.
    let err = engine
        .sanitize(
            &MechanismSpec::parse(
                "santext",
                &serde_json::json!({"eps": 1, "embedding": "wordpiece"}),
            )
            .unwrap(),
            "x",
            &key,
        )
        .unwrap_err();
    assert!(err.to_string().contains("dptext assets fetch"), "{err}");
    assert_eq!(err.kind(), crate::ErrorKind::MissingAsset);
    std::fs::remove_dir_all(dir).unwrap();
}

/// The real GloVe set, when installed.
fn real_glove() -> Option<Arc<Vocabulary>> {
    crate::assets::load_or_skip(|dir| {
        Embeddings::load(&dir.join(crate::assets::GLOVE_DIR), Some(50_000))
            .map(|e| Arc::new(Vocabulary::new(e, 64 << 20)))
    })
}

#[test]
fn real_glove_distributions() {
    let Some(v) = real_glove() else { return };
    let s = v.sampler(0).unwrap();
    let emb = v.embeddings();
    let doctor = emb.id("doctor").expect("doctor in GloVe 50k");
    let p = |eps: f64| s.probabilities(doctor, eps)[doctor as usize];
    // Measured in the issue: 0.0005 at eps 1, 0.15 at eps 3, 0.73 at eps 4.
    assert!(p(1.0) < 0.005, "{}", p(1.0));
    assert!((0.05..0.35).contains(&p(3.0)), "{}", p(3.0));
    assert!((0.5..0.9).contains(&p(4.0)), "{}", p(4.0));
    let pairs = [
        ("doctor", "nurse"),
        ("london", "paris"),
        ("fever", "cough"),
        ("the", "zebra"),
    ];
    for eps in [1.0, 3.0] {
        for (a, b) in pairs {
            let (a, b) = (emb.id(a).unwrap(), emb.id(b).unwrap());
            let (pa, pb) = (s.probabilities(a, eps), s.probabilities(b, eps));
            let bound = (eps * f64::from(emb.distance(a, b))).exp() * (1.0 + 1e-9);
            assert!(pa.iter().zip(&pb).all(|(x, y)| x / y <= bound));
        }
    }
    for (i, eps) in [1.0, 3.0, 5.0].into_iter().enumerate() {
        let (stat, crit) = chi_square(&s, doctor, eps, 30_000, 500 + i as u64);
        assert!(stat < crit, "eps {eps}: chi2 {stat:.1} >= {crit:.1}");
    }
}

#[test]
fn one_memory_bound_for_all_output_sets() {
    // Many SanText+ `w` values (many output sets) share one byte-bounded cache.
    let budget = 1u64 << 20;
    let v = Arc::new(Vocabulary::new(synthetic(3000, 8, 8), budget));
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    for i in 0..40 {
        let m = SanTextPlus::new(v.clone(), 2.0, 1.0, 0.5 + i as f64 * 0.01).unwrap();
        let text: String = (0..20).map(|j| format!("w{} ", j * 100)).collect();
        m.sanitize(&text, &mut rng, &RandomMode::Os).unwrap();
    }
    // 800 tables of ~24 KB were built; the cache keeps at most the budget.
    assert!(
        v.cached_bytes() <= budget,
        "{} > {budget}",
        v.cached_bytes()
    );
    assert!(v.cached_bytes() > budget / 2);
}
