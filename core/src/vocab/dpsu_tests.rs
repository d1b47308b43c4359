//! Tests of the set-union release: what is released, what is counted, the
//! noise's scale and the threshold's tail, with stated tolerances.

use super::*;
use crate::embeddings::tests::synthetic;

fn params(eps: f64, delta: f64, k: usize, noise: Noise) -> ReleaseParams {
    ReleaseParams {
        eps,
        delta,
        max_words_per_value: k,
        noise,
    }
}

/// 1,000 values share w1 and w2; one value alone holds w7.
fn corpus() -> Vec<String> {
    let mut v: Vec<String> = (0..1000)
        .map(|i| format!("w1 w2 and w{}", 100 + i % 50))
        .collect();
    v.push("w7 w1".to_string());
    v
}

#[test]
fn frequent_words_are_released_and_a_single_value_word_is_not() {
    let emb = synthetic(200, 8, 1);
    for noise in [Noise::Laplace, Noise::Gaussian] {
        let p = params(1.0, 1e-6, 4, noise);
        let mut seven = 0;
        for seed in 0..300 {
            let mut c = Counter::new(&emb, p).unwrap();
            for v in corpus() {
                c.add(&v);
            }
            let r = c.finish(&RandomMode::Seeded(seed)).unwrap();
            assert!(r.words.iter().any(|w| w == "w1"), "{noise:?} {r:?}");
            assert!(r.words.iter().any(|w| w == "w2"), "{noise:?} {r:?}");
            seven += usize::from(r.words.iter().any(|w| w == "w7"));
            assert_eq!(r.values, 1001);
            assert_eq!(r.candidates, 53);
        }
        // Pr[release] <= delta = 1e-6 per run: 300 runs never see it.
        assert_eq!(seven, 0, "{noise:?}");
    }
}

#[test]
fn a_value_counts_each_word_once() {
    let emb = synthetic(50, 8, 2);
    let mut c = Counter::new(&emb, params(1.0, 1e-6, 32, Noise::Laplace)).unwrap();
    c.add(&"w3 ".repeat(1000));
    c.add("W3 w4 unknownword w4");
    assert_eq!(c.counts.get(&3), Some(&2));
    assert_eq!(c.counts.get(&4), Some(&1));
    assert_eq!(c.counts.len(), 2, "unknown words are not counted");
    // Count 2 against a threshold of hundreds: never released.
    let r = c.finish(&RandomMode::Seeded(1)).unwrap();
    assert!(r.words.is_empty(), "{r:?}");
}

#[test]
fn a_value_contributes_at_most_k_words_the_same_ones_each_time() {
    let emb = synthetic(200, 8, 3);
    let text: String = (0..150).map(|i| format!("w{i} ")).collect();
    let chosen = |text: &str| {
        let mut c = Counter::new(&emb, params(1.0, 1e-6, 8, Noise::Laplace)).unwrap();
        c.add(text);
        assert_eq!(c.truncated, 1);
        let mut ids: Vec<u32> = c.counts.keys().copied().collect();
        ids.sort_unstable();
        ids
    };
    let a = chosen(&text);
    assert_eq!(a.len(), 8);
    // The choice depends on the word set only, not on order or repeats.
    let shuffled: String = (0..150).rev().map(|i| format!("w{i} w{i} ")).collect();
    assert_eq!(a, chosen(&shuffled));
}

#[test]
fn laplace_noise_has_its_scale() {
    // b = k / eps = 2. Mean |x| = b and Var = 2 b^2; with 200,000 draws the
    // standard errors are about 0.2% and 0.5%: tolerances 1% and 3%.
    let p = params(2.0, 1e-6, 4, Noise::Laplace);
    assert_eq!(p.scale(), 2.0);
    let mut rng = RandomMode::Seeded(11).rng_for(&[b"noise"]);
    let n = 200_000;
    let xs: Vec<f64> = (0..n).map(|_| p.draw(&mut rng)).collect();
    let mean_abs = xs.iter().map(|x| x.abs()).sum::<f64>() / n as f64;
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
    assert!((mean_abs / 2.0 - 1.0).abs() < 0.01, "{mean_abs}");
    assert!((var / 8.0 - 1.0).abs() < 0.03, "{var}");
    assert!(mean.abs() < 0.03, "{mean}");
}

#[test]
fn gaussian_noise_has_its_scale() {
    let p = params(1.0, 1e-5, 1, Noise::Gaussian);
    let sigma = p.scale();
    // Balle and Wang's analytic sigma is below the classical
    // sqrt(2 ln(1.25 / delta')) / eps (4.85 at delta' = 5e-6).
    assert!(sigma > 3.0 && sigma < 4.85, "{sigma}");
    let mut rng = RandomMode::Seeded(12).rng_for(&[b"noise"]);
    let n = 200_000;
    let var = (0..n).map(|_| p.draw(&mut rng).powi(2)).sum::<f64>() / n as f64;
    // Standard error of the variance: sqrt(2/n) = 0.3%: tolerance 2%.
    assert!(
        (var.sqrt() / sigma - 1.0).abs() < 0.02,
        "{} vs {sigma}",
        var.sqrt()
    );
}

#[test]
fn the_threshold_passes_a_count_of_one_with_probability_delta() {
    // k = 1: a new word passes with probability exactly delta (Laplace)
    // or delta / 2 (Gaussian). 400,000 trials at delta = 0.05: the
    // standard error is under 2% of delta: tolerance 8%.
    for (noise, share) in [(Noise::Laplace, 1.0), (Noise::Gaussian, 0.5)] {
        let p = params(1.0, 0.05, 1, noise);
        let t = p.threshold();
        let mut rng = RandomMode::Seeded(13).rng_for(&[noise.name().as_bytes()]);
        let n = 400_000;
        let passed = (0..n).filter(|_| 1.0 + p.draw(&mut rng) > t).count();
        let rate = passed as f64 / n as f64;
        let want = 0.05 * share;
        assert!(
            (rate / want - 1.0).abs() < 0.08,
            "{noise:?}: {rate} vs {want}"
        );
    }
    // k words: a union of k chances, still at most delta in all.
    let p = params(1.0, 1e-6, 32, Noise::Laplace);
    let b = 32.0;
    let one = 0.5 * (-(p.threshold() - 1.0) / b).exp();
    assert!(1.0 - (1.0 - one).powi(32) <= 1e-6 * (1.0 + 1e-9));
}

#[test]
fn normal_tail_helpers_are_accurate() {
    assert!((ln_phi(0.0) - 0.5f64.ln()).abs() < 1e-7);
    assert!((ln_phi(-1.959_964).exp() - 0.025).abs() < 1e-8);
    assert!((upper_quantile(0.025) - 1.959_964).abs() < 1e-5);
    assert!((upper_quantile(1e-9) - 5.997_807).abs() < 1e-3);
    assert!(ln_phi(-30.0).is_finite());
}

#[test]
fn bad_parameters_are_clear_errors() {
    let ok = params(1.0, 1e-6, 32, Noise::Laplace);
    let msg = |p: ReleaseParams| p.validate().unwrap_err().to_string();
    assert!(msg(ReleaseParams { eps: 0.0, ..ok }).contains("\"eps\": must be > 0"));
    assert!(msg(ReleaseParams {
        eps: f64::NAN,
        ..ok
    })
    .contains("\"eps\""));
    for d in [0.0, 0.5, -1.0, f64::NAN, 1.0] {
        assert!(
            msg(ReleaseParams { delta: d, ..ok }).contains("\"delta\": must be in (0, 0.5)"),
            "{d}"
        );
    }
    assert!(msg(ReleaseParams {
        max_words_per_value: 0,
        ..ok
    })
    .contains("\"max_words_per_value\""));
    assert!("poisson"
        .parse::<Noise>()
        .unwrap_err()
        .to_string()
        .contains("\"noise\""));
    let wp =
        Embeddings::from_parts("wp", VocabKind::Wordpiece, vec!["a".into()], vec![0.0], 1).unwrap();
    assert!(Counter::new(&wp, ok).is_err());
}
