//! CusText: the strategies' output sets, Eq. 9 (exact and sampled), the
//! levels and stopwords, the mapping cache, parameter checks.

use std::collections::HashMap;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::embeddings::tests::synthetic;
use crate::mechanisms::vocabulary::Vocabulary;
use crate::mechanisms::Mechanism;
use crate::rng::RandomMode;

fn setup(
    n: usize,
    k: usize,
    strategy: MappingStrategy,
    metric: Metric,
) -> (Arc<Vocabulary>, Arc<Mapping>) {
    let v = Arc::new(Vocabulary::new(synthetic(n, 8, 21), 1 << 20));
    let m = Mapping::build(v.embeddings(), k, strategy, metric, 2).unwrap();
    (v, Arc::new(m))
}

#[test]
fn aggressive_sets_are_each_tokens_k_nearest() {
    let (v, m) = setup(300, 10, MappingStrategy::Aggressive, Metric::Euclidean);
    let emb = v.embeddings();
    for x in [0u32, 7, 299] {
        let set = m.output_set(x);
        assert_eq!(set.len(), 10);
        assert_eq!(set[0], x, "x is its own nearest");
        let far = set.iter().map(|&y| emb.distance(x, y)).fold(0f32, f32::max);
        let closer_outside = (0..300u32)
            .filter(|y| !set.contains(y))
            .filter(|&y| emb.distance(x, y) < far)
            .count();
        assert_eq!(closer_outside, 0);
    }
}

#[test]
fn conservative_sets_are_disjoint_and_cover_everything() {
    for metric in [Metric::Euclidean, Metric::Cosine] {
        let (_, m) = setup(503, 20, MappingStrategy::Conservative, metric);
        let mut seen = vec![false; 503];
        for s in &m.sets {
            for &y in s {
                assert!(!seen[y as usize], "{y} in two output sets");
                seen[y as usize] = true;
            }
        }
        assert!(seen.iter().all(|&b| b));
        assert_eq!(m.adjacent_share(), 1.0, "every input shares its set");
    }
}

#[test]
fn balanced_leaves_almost_no_token_without_adjacent_tokens() {
    let (_, agg) = setup(1000, 20, MappingStrategy::Aggressive, Metric::Euclidean);
    let (_, bal) = setup(1000, 20, MappingStrategy::Balanced, Metric::Euclidean);
    // Table 4 of the paper: aggressive leaves most tokens alone, balanced almost none.
    assert!(
        agg.adjacent_share() < 0.01,
        "aggressive {}",
        agg.adjacent_share()
    );
    assert!(
        bal.adjacent_share() > 0.9,
        "balanced {}",
        bal.adjacent_share()
    );
}

#[test]
fn eps_zero_gives_one_over_k_and_scores_follow_eq9() {
    let (v, m) = setup(400, 20, MappingStrategy::Balanced, Metric::Euclidean);
    for (_, p) in m.probabilities(v.embeddings(), 3, 0.0) {
        assert!((p - 1.0 / 20.0).abs() < 1e-12);
    }
    // Eq. 9: ratio of the best and worst output is exp(eps / 2).
    let p = m.probabilities(v.embeddings(), 3, 4.0);
    let hi = p.iter().map(|x| x.1).fold(0.0, f64::max);
    let lo = p.iter().map(|x| x.1).fold(1.0, f64::min);
    assert!((hi / lo - 2f64.exp()).abs() < 1e-9, "{}", hi / lo);
}

#[test]
fn samples_follow_eq9() {
    // Chi-square, K = 20 bins, df = 19, critical value at 0.001: 43.82.
    let (v, m) = setup(400, 20, MappingStrategy::Balanced, Metric::Cosine);
    let emb = v.embeddings();
    let mut rng = ChaCha20Rng::seed_from_u64(17);
    for (x, eps) in [(5u32, 1.0), (200, 3.0), (399, 6.0)] {
        let p = m.probabilities(emb, x, eps);
        let n = 30_000;
        let mut count: HashMap<u32, f64> = HashMap::new();
        for _ in 0..n {
            *count.entry(m.sample(emb, x, eps, &mut rng)).or_default() += 1.0;
        }
        let stat: f64 = p
            .iter()
            .map(|&(y, py)| {
                let e = py * n as f64;
                (count.get(&y).copied().unwrap_or(0.0) - e).powi(2) / e
            })
            .sum();
        assert!(stat < 43.82, "x {x} eps {eps}: chi2 {stat}");
        assert_eq!(
            count
                .keys()
                .filter(|y| !p.iter().any(|q| q.0 == **y))
                .count(),
            0
        );
    }
}

#[test]
fn levels_and_stopwords() {
    let (v, m) = setup(300, 20, MappingStrategy::Balanced, Metric::Euclidean);
    let text = "w5 w5 w5 w5 w5 w5 w5 w5 the W5";
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let rec = CusText::new(v.clone(), m.clone(), 0.5, Level::Record, true).unwrap();
    let out = rec.sanitize(text, &mut rng, &RandomMode::Os).unwrap();
    let words: Vec<&str> = out.text.split(' ').collect();
    assert!(words[..8].iter().all(|w| *w == words[0]), "{}", out.text);
    assert_eq!(words[8], "the", "stopword kept");
    assert_eq!(
        words[9].to_lowercase(),
        words[0],
        "repeat in another case too"
    );
    assert_eq!(out.cost.kept_tokens, 1);
    assert_eq!(out.cost.worst_case_eps, 0.5, "one draw at record level");
    let tok = CusText::new(v.clone(), m.clone(), 0.5, Level::Token, false).unwrap();
    let out = tok.sanitize(text, &mut rng, &RandomMode::Os).unwrap();
    let distinct: std::collections::HashSet<&str> = out.text.split(' ').collect();
    assert!(distinct.len() > 2, "token level draws afresh: {}", out.text);
    // Nine draws: "the" is not in this vocabulary (a uniform draw, eps 0).
    assert_eq!(out.cost.oov_tokens, 1);
    assert_eq!(out.cost.worst_case_eps, 0.5 * 9.0);
    // Dataset level: the same output for a token in every value, and
    // only with a deterministic random mode.
    let ds = CusText::new(v, m, 0.5, Level::Dataset, true).unwrap();
    assert!(ds.sanitize("w5", &mut rng, &RandomMode::Os).is_err());
    assert!(
        ds.sanitize("w5", &mut rng, &RandomMode::Seeded(1)).is_err(),
        "a public seed is not enough"
    );
    let key = RandomMode::from_settings(None, Some(b"dataset level test key")).unwrap();
    let a = ds.sanitize("w5 w9", &mut rng, &key).unwrap().text;
    let b = ds.sanitize("w9 and w5", &mut rng, &key).unwrap().text;
    let (a, b): (Vec<&str>, Vec<&str>) = (a.split(' ').collect(), b.split(' ').collect());
    assert_eq!((a[0], a[1]), (b[2], b[0]));
}

#[test]
fn mapping_round_trips_and_detects_corruption() {
    let (v, m) = setup(200, 10, MappingStrategy::Conservative, Metric::Euclidean);
    let bytes = m.to_bytes();
    let back =
        Mapping::from_bytes(&bytes, MappingStrategy::Conservative, Metric::Euclidean).unwrap();
    assert_eq!(*m, back);
    let mut bad = bytes.clone();
    bad[20] ^= 1;
    assert!(Mapping::from_bytes(&bad, MappingStrategy::Conservative, Metric::Euclidean).is_none());
    assert!(Mapping::from_bytes(
        &bytes[..10],
        MappingStrategy::Conservative,
        Metric::Euclidean
    )
    .is_none());
    let dir = std::env::temp_dir().join(format!("dptext-custext-{}", std::process::id()));
    // Without permission to build, a missing mapping is an error naming the CLI.
    let e = Mapping::load_or_build(
        v.embeddings(),
        &dir,
        10,
        MappingStrategy::Conservative,
        Metric::Euclidean,
        false,
    )
    .unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::MappingNotBuilt, "{e}");
    assert!(
        e.custext_map_command()
            .is_some_and(|c| c.starts_with("dptext custext-map --k 10 --mapping conservative")),
        "{e}"
    );
    let built = Mapping::load_or_build(
        v.embeddings(),
        &dir,
        10,
        MappingStrategy::Conservative,
        Metric::Euclidean,
        true,
    )
    .unwrap();
    let file = cache_file(
        &dir,
        v.embeddings(),
        10,
        MappingStrategy::Conservative,
        Metric::Euclidean,
    );
    assert!(file.exists());
    // Cached: loads even when building is not allowed.
    let cached = Mapping::load_or_build(
        v.embeddings(),
        &dir,
        10,
        MappingStrategy::Conservative,
        Metric::Euclidean,
        false,
    )
    .unwrap();
    assert_eq!(built, cached);
    std::fs::write(&file, b"garbage").unwrap();
    let rebuilt = Mapping::load_or_build(
        v.embeddings(),
        &dir,
        10,
        MappingStrategy::Conservative,
        Metric::Euclidean,
        true,
    )
    .unwrap();
    assert_eq!(built, rebuilt);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn parameters_are_validated() {
    use crate::mechanisms::MechanismSpec;
    let ok = MechanismSpec::parse("custext", &serde_json::json!({"eps": 1})).unwrap();
    assert!(matches!(
        ok,
        MechanismSpec::CusText(super::CusTextSpec {
            k: 20,
            keep_stopwords: true,
            level: Level::Record,
            mapping: MappingStrategy::Balanced,
            ..
        })
    ));
    for (params, msg) in [
        (serde_json::json!({"eps": 0}), "\"eps\""),
        (serde_json::json!({"eps": 1, "k": 0}), "\"k\""),
        (serde_json::json!({"eps": 1, "k": 5000}), "\"k\""),
        (
            serde_json::json!({"eps": 1, "mapping": "greedy"}),
            "\"mapping\"",
        ),
        (serde_json::json!({"eps": 1, "level": "row"}), "\"level\""),
        (
            serde_json::json!({"eps": 1, "metric": "manhattan"}),
            "\"metric\"",
        ),
    ] {
        let e = MechanismSpec::parse("custext", &params).unwrap_err();
        assert!(e.to_string().contains(msg), "{params}: {e}");
    }
    assert!(CusText::is_stopword("The") && !CusText::is_stopword("fever"));
}

#[test]
fn progress_is_monotone_reaches_the_total_and_changes_nothing() {
    // Big enough (in a debug build) for the build to outlast the
    // reporter's interval, so that some calls fall between first and last.
    let n = 2000;
    let v = Vocabulary::new(synthetic(n, 8, 5), 1 << 24);
    for strategy in [
        MappingStrategy::Aggressive,
        MappingStrategy::Balanced,
        MappingStrategy::Conservative,
    ] {
        let calls = std::sync::Mutex::new(Vec::new());
        let record = |done: usize, total: usize| {
            let mut c = calls.lock().unwrap_or_else(|p| p.into_inner());
            c.push((done, total, std::thread::current().id()));
        };
        let with = Mapping::build_with_progress(
            v.embeddings(),
            20,
            strategy,
            Metric::Euclidean,
            2,
            &record,
        )
        .unwrap();
        let without = Mapping::build(v.embeddings(), 20, strategy, Metric::Euclidean, 2).unwrap();
        assert_eq!(with.to_bytes(), without.to_bytes(), "{strategy:?}");
        let calls = calls.into_inner().unwrap();
        assert_eq!(calls.first().map(|c| c.0), Some(0), "{strategy:?}");
        assert_eq!(calls.last().map(|c| c.0), Some(n), "{strategy:?}");
        assert!(calls.iter().all(|c| c.1 == n));
        assert!(
            calls.windows(2).all(|w| w[0].0 < w[1].0),
            "{strategy:?}: not strictly increasing: {:?}",
            calls.iter().map(|c| c.0).collect::<Vec<_>>()
        );
        let me = std::thread::current().id();
        assert!(
            calls.iter().all(|c| c.2 == me),
            "only the calling thread reports"
        );
    }
}
