//! NDD against the papers' case pairs and the build script's reference
//! numbers; batched = naive; distortion; the CUDA fallback.
//!
//! The model is the committed `models/mlm` (or `DPTEXT_MLM_DIR`); the ONNX
//! Runtime library comes from the assets (tests skip without them unless
//! `DPTEXT_REQUIRE_ASSETS=1`, as the project's test command sets).

use std::path::PathBuf;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::tally::{reorder, Job, Tally};
use super::*;
use crate::cost::Guarantee;
use crate::detect::model::ORT_LIB;
use crate::mechanisms::Mechanism;
use crate::mlm::{MaskedLm, Row};
use crate::runtime::Device;

fn mlm_dir() -> PathBuf {
    std::env::var_os("DPTEXT_MLM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models/mlm")))
}

fn load(device: Device) -> Option<MaskedLm> {
    crate::assets::load_or_skip(|dir| MaskedLm::load(&dir.join(ORT_LIB), &mlm_dir(), 2, device, 64))
}

#[derive(serde::Deserialize)]
struct Pair {
    label: String,
    original: String,
    fitting: String,
    unfitting: String,
    span_original_chars: (usize, usize),
    span_fitting_chars: (usize, usize),
    span_unfitting_chars: (usize, usize),
    ndd_reference: Reference,
}

#[derive(serde::Deserialize)]
struct Reference {
    fitting: f64,
    unfitting: f64,
}

fn bytes(s: &str, (a, b): (usize, usize)) -> (usize, usize) {
    let at = |c: usize| s.char_indices().nth(c).map_or(s.len(), |(i, _)| i);
    (at(a), at(b))
}

/// The quality bar of issue 4: NDD ranks at least 7 of the papers' 8 case
/// pairs as the papers do (the fitting replacement scores lower), and our
/// implementation reproduces the build script's numbers (tolerance 1e-3
/// relative, from float32 logits summed in a different order).
#[test]
fn paper_pairs_are_ranked_and_match_the_reference() {
    let Some(mlm) = load(Device::Cpu) else { return };
    let pairs: Vec<Pair> = serde_json::from_str(
        &std::fs::read_to_string(mlm_dir().join("paper_pairs.json")).expect("paper_pairs.json"),
    )
    .expect("pairs parse");
    assert_eq!(pairs.len(), 8);
    let scorer = Scorer::new(&mlm, 0.9, Divergence::Kl).unwrap();
    let mut right = 0;
    for p in &pairs {
        let so = bytes(&p.original, p.span_original_chars);
        let fit = scorer
            .ndd_spans(
                &p.original,
                so,
                &p.fitting,
                bytes(&p.fitting, p.span_fitting_chars),
            )
            .unwrap();
        let unfit = scorer
            .ndd_spans(
                &p.original,
                so,
                &p.unfitting,
                bytes(&p.unfitting, p.span_unfitting_chars),
            )
            .unwrap();
        for (ours, reference) in [
            (fit, p.ndd_reference.fitting),
            (unfit, p.ndd_reference.unfitting),
        ] {
            assert!(
                (ours - reference).abs() <= 1e-3 * reference.abs().max(1.0),
                "{}: ours {ours}, reference {reference}",
                p.label
            );
        }
        eprintln!("{:5} fitting {fit:.4} unfitting {unfit:.4}", p.label);
        right += usize::from(fit < unfit);
    }
    assert!(
        right >= 7,
        "NDD ranks {right} of 8 case pairs as the papers do"
    );
}

#[test]
fn batched_scores_equal_naive_ones_and_identical_texts_score_zero() {
    let Some(mlm) = load(Device::Cpu) else { return };
    let scorer = Scorer::new(&mlm, 0.9, Divergence::Kl).unwrap();
    let ids = mlm
        .encode("Masao Yoshikawa was defeated in the match in Hokkaido .")
        .unwrap()
        .ids;
    let cands: Vec<Vec<u32>> = ["Moscow", "1926", "the city of Paris"]
        .iter()
        .map(|c| mlm.encode(c).unwrap().ids)
        .collect();
    let n = ids.len();
    let spans = vec![
        SpanCandidates {
            start: n - 2,
            end: n - 1,
            candidates: cands.clone(),
        },
        SpanCandidates {
            start: 0,
            end: 2,
            candidates: cands,
        },
    ];
    let window = Window { ids, spans };
    let fast = scorer.score(&window).unwrap();
    let slow = scorer.score_naive(&window).unwrap();
    for (a, b) in fast.iter().flatten().zip(slow.iter().flatten()) {
        assert!((a - b).abs() < 1e-6 * a.abs().max(1.0), "{a} vs {b}");
        assert!(*a > 0.0);
    }
    let t = "The patient was seen on Monday.";
    assert_eq!(scorer.ndd(t, t).unwrap(), 0.0);
    assert!(scorer.ndd(t, "The patient was seen on Friday.").unwrap() > 0.0);
    let err = scorer
        .ndd("alpha beta", "gamma delta")
        .unwrap_err()
        .to_string();
    assert!(err.contains("shares no unedited token"), "{err}");
    let h = Scorer::new(&mlm, 0.9, Divergence::Hellinger).unwrap();
    let v = h.ndd(t, "The patient was seen on 1926.").unwrap();
    let bound: f64 = (1..=8).map(|d| 0.9f64.powi(d)).sum::<f64>() * 2.0;
    assert!(v > 0.0 && v <= bound, "{v}");
    assert!(Scorer::new(&mlm, 0.0, Divergence::Kl).is_err());
    assert!(Scorer::new(&mlm, 1.5, Divergence::Kl).is_err());
}

/// The original's masked copies run only where a neighbour needs them:
/// in a window with one span, never inside the span (the naive baseline of
/// the benchmark counts the same way).
#[test]
fn originals_run_only_at_neighbour_positions() {
    let Some(mlm) = load(Device::Cpu) else { return };
    let scorer = Scorer::new(&mlm, 0.9, Divergence::Kl).unwrap();
    let ids = mlm
        .encode("Call Maria Lopez at the Springfield clinic before Friday.")
        .unwrap()
        .ids;
    let n = ids.len();
    let cands: Vec<Vec<u32>> = ["Anna Berg", "Peter", "Dr. Okafor"]
        .iter()
        .map(|c| mlm.encode(c).unwrap().ids)
        .collect();
    let one = |spans: Vec<SpanCandidates>| Window {
        ids: ids.clone(),
        spans,
    };
    let span = |start, end| SpanCandidates {
        start,
        end,
        candidates: cands.clone(),
    };
    // One span of 2 tokens: n - 2 originals and n - 2 jobs per candidate.
    let before = mlm.rows_run();
    scorer.score(&one(vec![span(1, 3)])).unwrap();
    assert_eq!(mlm.rows_run() - before, ((n - 2) * 4) as u64);
    // Two spans: every position is some span's neighbour.
    let before = mlm.rows_run();
    scorer
        .score(&one(vec![span(1, 3), span(n - 2, n - 1)]))
        .unwrap();
    assert_eq!(
        mlm.rows_run() - before,
        (n + (n - 2) * 3 + (n - 1) * 3) as u64
    );
}

/// A pool of sessions computes exactly what one session does: the same
/// scores, winners and log-probabilities, bit for bit, and an error in any
/// call reaches the caller.
#[test]
fn a_session_pool_agrees_with_one_session_bit_for_bit() {
    let Some(one) = crate::assets::load_or_skip(|dir| {
        MaskedLm::load_sessions(&dir.join(ORT_LIB), &mlm_dir(), 1, 1, Device::Cpu, 8)
    }) else {
        return;
    };
    let Some(pool) = crate::assets::load_or_skip(|dir| {
        MaskedLm::load_sessions(&dir.join(ORT_LIB), &mlm_dir(), 3, 1, Device::Cpu, 8)
    }) else {
        return;
    };
    assert_eq!((one.pool(), pool.pool()), (1, 3));
    let texts = [
        "Patient John Smith was admitted to Boston General on March 3 with chest pain.",
        "Call Maria Lopez at the Springfield clinic before Friday.",
    ];
    let cands: Vec<Vec<u32>> = ["Moscow", "Anna Berg", "the city of Paris", "Ohio", "1926"]
        .iter()
        .map(|c| one.encode(c).unwrap().ids)
        .collect();
    let windows: Vec<Window> = texts
        .iter()
        .map(|t| {
            let ids = one.encode(t).unwrap().ids;
            let n = ids.len();
            Window {
                spans: vec![
                    SpanCandidates {
                        start: 1,
                        end: 3,
                        candidates: cands.clone(),
                    },
                    SpanCandidates {
                        start: n - 3,
                        end: n - 1,
                        candidates: cands[1..].to_vec(),
                    },
                ],
                ids,
            }
        })
        .collect();
    let a = Scorer::new(&one, 0.9, Divergence::Kl).unwrap();
    let b = Scorer::new(&pool, 0.9, Divergence::Kl).unwrap();
    for w in &windows {
        assert_eq!(a.score(w).unwrap(), b.score(w).unwrap());
    }
    let want = a.choose(&windows).unwrap();
    assert_eq!(want, b.choose(&windows).unwrap());
    // Callers sharing the pool at once get the same answers.
    let both: Vec<_> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..3).map(|_| s.spawn(|| b.choose(&windows))).collect();
        runs.into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    assert!(both.iter().all(|c| *c == want));
    let rows: Vec<Row> = (1..12).map(|k| a.masked_row(&windows[0].ids, k)).collect();
    assert_eq!(
        one.log_probs(&rows).unwrap(),
        pool.log_probs(&rows).unwrap()
    );
    // A row longer than the model takes, in the last call of the pool.
    let mut bad = rows.clone();
    bad.push(Row {
        ids: vec![101; one.config().max_position_embeddings + 1],
        position: 1,
    });
    let err = pool.log_probs(&bad).unwrap_err().to_string();
    assert!(err.contains("exceeds"), "{err}");
}

/// The pruned search must return exactly the full evaluation's winner
/// (first of equals) and its NDD, with fewer masked copies.
#[test]
fn pruned_choice_equals_the_full_argmin_with_fewer_rows() {
    let Some(mlm) = load(Device::Cpu) else { return };
    let sentences = [
        "Patient John Smith was admitted to Boston General on March 3 with chest pain.",
        "Call Maria Lopez at the Springfield clinic before Friday.",
        "Masao Yoshikawa was defeated in the match in Hokkaido .",
        "Seen by Dr. Chen.",
    ];
    let pool = [
        "Moscow",
        "Anna Berg",
        "the city of Paris",
        "Ohio",
        "Peter",
        "1926",
        "Dr. Okafor",
        "St. Mary's Hospital",
        "Tuesday",
        "Kim",
    ];
    let cands: Vec<Vec<u32>> = pool.iter().map(|c| mlm.encode(c).unwrap().ids).collect();
    let mut windows = Vec::new();
    for (n, text) in sentences.iter().enumerate() {
        let ids = mlm.encode(text).unwrap().ids;
        let len = ids.len();
        // Spans at the start, in the middle and at the end; the last
        // window's span is the whole text (no neighbours: every NDD is 0).
        let mut spans = vec![
            SpanCandidates {
                start: 0,
                end: 2,
                candidates: cands[n..n + 6].to_vec(),
            },
            SpanCandidates {
                start: len / 2,
                end: len / 2 + 1,
                candidates: cands.clone(),
            },
            SpanCandidates {
                start: len - 1,
                end: len,
                candidates: vec![],
            },
        ];
        if n == 3 {
            spans.push(SpanCandidates {
                start: 0,
                end: len,
                candidates: cands[..3].to_vec(),
            });
        }
        // A duplicated candidate: the first of the equals must win.
        let dup = spans[1].candidates[0].clone();
        spans[1].candidates.push(dup);
        windows.push(Window { ids, spans });
    }
    for div in [Divergence::Kl, Divergence::Hellinger] {
        let scorer = Scorer::new(&mlm, 0.9, div).unwrap();
        let before = mlm.rows_run();
        let full: Vec<Vec<Vec<f64>>> = windows.iter().map(|w| scorer.score(w).unwrap()).collect();
        let full_rows = mlm.rows_run() - before;
        let before = mlm.rows_run();
        let chosen = scorer.choose(&windows).unwrap();
        let pruned_rows = mlm.rows_run() - before;
        for (w, (scores, choices)) in full.iter().zip(&chosen).enumerate() {
            for (s, (sc, choice)) in scores.iter().zip(choices).enumerate() {
                let want = sc
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .map(|(i, &v)| Choice { index: i, ndd: v });
                assert_eq!(*choice, want, "{div:?} window {w} span {s}: {sc:?}");
            }
        }
        assert_eq!(chosen[3][3], Some(Choice { index: 0, ndd: 0.0 }));
        // KL (the default): here about half of the rows; the demo notes'
        // benchmark saves about 75% against the naive computation.
        // Hellinger terms fall off more slowly with distance: fewer rows,
        // never more.
        let bound = match div {
            Divergence::Kl => full_rows * 2 / 3,
            Divergence::Hellinger => full_rows + 1,
        };
        assert!(
            pruned_rows < bound,
            "{div:?}: pruning ran {pruned_rows} rows, the full evaluation {full_rows}"
        );
    }
}

fn tally(div: &[f64], done: usize) -> Tally {
    // Neighbours at distances 1, 1, 2, 2, 3, ... (left and right).
    let jobs: Vec<Job> = (0..div.len())
        .map(|x| Job {
            k: x,
            k2: x,
            w: 0.9f64.powi((x / 2 + 1) as i32),
            d: x / 2 + 1,
        })
        .collect();
    let order: Vec<usize> = (0..div.len()).collect();
    let partial = jobs[..done].iter().zip(div).map(|(j, d)| j.w * d).sum();
    Tally {
        div: div
            .iter()
            .enumerate()
            .map(|(x, &d)| if x < done { d } else { 0.0 })
            .collect(),
        jobs,
        order,
        done,
        partial,
        pruned: false,
    }
}

/// Survivors continue where the best complete candidate's weighted terms
/// were largest (nearest first among equals); what they have done, the
/// complete and the pruned candidates are left as they are.
#[test]
fn survivors_continue_at_the_best_complete_candidates_largest_terms() {
    let mut per = vec![
        // Complete, NDD about 3.5: the best.
        tally(&[0.1, 0.1, 0.0, 2.0, 0.0, 0.5, 1.0, 0.0], 8),
        // Complete, larger: not the key.
        tally(&[9.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 9.0], 8),
        // Two survivors, two jobs done.
        tally(&[0.2, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 2),
        tally(&[0.1, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 2),
        // Pruned: untouched.
        tally(&[5.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 2),
    ];
    per[4].pruned = true;
    reorder(&mut per);
    // Weighted key: x3 2.0 * 0.81, x6 1.0 * 0.656, x5 0.5 * 0.729, then
    // the zeros x2, x4, x7 by distance.
    for c in [2, 3] {
        assert_eq!(per[c].order, [0, 1, 3, 6, 5, 2, 4, 7], "candidate {c}");
    }
    for c in [0, 1, 4] {
        assert_eq!(per[c].order, (0..8).collect::<Vec<_>>(), "candidate {c}");
    }
    // Without a complete candidate there is no key: nothing moves.
    let mut open = vec![tally(&[1.0, 0.0, 3.0], 1), tally(&[0.0, 2.0, 1.0], 1)];
    reorder(&mut open);
    assert!(open.iter().all(|t| t.order == [0, 1, 2]));
}

#[test]
fn long_texts_are_scored_in_a_window_not_truncated() {
    let Some(mlm) = load(Device::Cpu) else { return };
    let scorer = Scorer::new(&mlm, 0.9, Divergence::Kl).unwrap();
    let filler = "the weather was mild and the roads were quiet . ".repeat(80);
    let a = format!("{filler}Masao Yoshikawa was defeated in Hokkaido . {filler}");
    let b = a.replace("Hokkaido", "Moscow");
    assert!(mlm.encode(&a).unwrap().ids.len() > mlm.max_tokens());
    let long = scorer.ndd(&a, &b).unwrap();
    let short = scorer
        .ndd(
            "Masao Yoshikawa was defeated in Hokkaido .",
            "Masao Yoshikawa was defeated in Moscow .",
        )
        .unwrap();
    assert!(
        long.is_finite() && long > 0.0 && short > 0.0,
        "{long} {short}"
    );
}

fn distorter(mlm: MaskedLm, mode: Mode) -> Option<NddDistort> {
    let ner = crate::assets::load_or_skip(|dir| crate::detect::Detector::load(dir, 1))?;
    NddDistort::new(Arc::new(ner), Arc::new(mlm), mode, 8, 0.9, Divergence::Kl).ok()
}

#[test]
fn distortion_replaces_every_span_and_keeps_the_rest() {
    let Some(mlm) = load(Device::Cpu) else { return };
    let Some(d) = distorter(mlm, Mode::Substitutive) else {
        return;
    };
    let text = "Kathryn Herrera was admitted to St. Mary's Hospital in Springfield on May 3, 2024. She went home.";
    let spans = d.ner.detect(text).unwrap();
    assert!(spans.len() >= 3, "{spans:?}");
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let out = d.sanitize(text, &mut rng, &crate::RandomMode::Os).unwrap();
    for s in &spans {
        assert!(
            !out.text.contains(&text[s.start..s.end]),
            "{} survived: {}",
            &text[s.start..s.end],
            out.text
        );
    }
    assert!(out.text.ends_with("She went home."), "{}", out.text);
    assert!(matches!(out.cost.guarantee, Guarantee::None { .. }));
    let again = d
        .sanitize(
            text,
            &mut ChaCha20Rng::seed_from_u64(7),
            &crate::RandomMode::Os,
        )
        .unwrap();
    assert_eq!(out.text, again.text, "seeded runs repeat");
    assert_eq!(
        d.sanitize("No names here.", &mut rng, &crate::RandomMode::Os)
            .unwrap()
            .text,
        "No names here."
    );
}

#[test]
fn generative_distortion_fills_spans_from_the_model() {
    let Some(mlm) = load(Device::Cpu) else { return };
    let Some(d) = distorter(mlm, Mode::Generative) else {
        return;
    };
    // (A weekday is a date span since the clinical detection work, so the
    // sentence has none: only the name may change.)
    let text = "Kathryn Herrera was admitted to the ward.";
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let out = d
        .sanitize(text, &mut rng, &crate::RandomMode::Os)
        .unwrap()
        .text;
    assert!(!out.contains("Kathryn Herrera"), "{out}");
    assert!(out.ends_with("was admitted to the ward."), "{out}");
}

/// Asking for CUDA where it cannot start runs on the CPU, warns once per
/// loaded model, and gives the CPU's numbers.
#[test]
fn cuda_request_falls_back_to_cpu_with_one_warning() {
    let Some(cpu) = load(Device::Cpu) else { return };
    let before = crate::runtime::fallback_count();
    let Some(gpu) = load(Device::Cuda) else {
        return;
    };
    if gpu.fallback().is_none() {
        // A machine with a working CUDA provider: nothing to fall back from.
        assert_eq!(gpu.device(), Device::Cuda);
        return;
    }
    assert_eq!(gpu.device(), Device::Cpu);
    assert_eq!(crate::runtime::fallback_count(), before + 1);
    let (a, b) = (
        "The patient was seen on Monday.",
        "The patient was seen on Friday.",
    );
    let x = Scorer::new(&cpu, 0.9, Divergence::Kl)
        .unwrap()
        .ndd(a, b)
        .unwrap();
    let y = Scorer::new(&gpu, 0.9, Divergence::Kl)
        .unwrap()
        .ndd(a, b)
        .unwrap();
    assert!((x - y).abs() < 1e-9 * x.max(1.0), "{x} vs {y}");
}

/// A sentence longer than the model's window: both modes work in a window
/// around each span, and nothing outside the spans changes.
#[test]
fn long_sentences_are_distorted_in_windows() {
    let Some(mlm) = load(Device::Cpu) else { return };
    let Some(d) = distorter(mlm, Mode::Generative) else {
        return;
    };
    let filler = "and the weather was mild ".repeat(120);
    let text = format!("On arrival {filler}Kathryn Herrera {filler}went home");
    let spans = d.ner.detect(&text).unwrap();
    assert!(
        spans
            .iter()
            .any(|s| &text[s.start..s.end] == "Kathryn Herrera"),
        "{spans:?}"
    );
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let out = d.distort_spans(&text, &spans, &mut rng).unwrap();
    assert!(!out.contains("Kathryn Herrera"));
    assert!(
        out.starts_with("On arrival and the weather") && out.ends_with("went home"),
        "{out}"
    );
}

/// A span too long to score in the model's window (a pasted link of
/// hundreds of tokens) is replaced by a surrogate without scoring, in both
/// modes: never an error, whose text (the span's token count) or whose
/// failing the read would tell the raw span's length.
#[test]
fn spans_longer_than_the_window_are_replaced_unscored() {
    let Some(probe) = load(Device::Cpu) else {
        return;
    };
    let max = probe.max_tokens();
    for mode in [Mode::Substitutive, Mode::Generative] {
        let Some(mlm) = load(Device::Cpu) else { return };
        let Some(d) = distorter(mlm, mode) else {
            return;
        };
        for dots in [200, 300, 600] {
            let url = format!("http://{}com", "a.".repeat(dots));
            let text = format!("Results at {url} today.");
            let span = crate::detect::Span {
                start: "Results at ".len(),
                end: "Results at ".len() + url.len(),
                label: crate::detect::Label::Id,
                score: 1.0,
                source: crate::detect::Source::Rule("test"),
            };
            let tokens = probe.encode(&url).unwrap().ids.len();
            let mut rng = ChaCha20Rng::seed_from_u64(dots as u64);
            let out = d
                .distort_spans(&text, &[span], &mut rng)
                .unwrap_or_else(|e| panic!("{mode:?}, {tokens} tokens (window {max}): {e}"));
            assert!(!out.contains(&url), "{out}");
            assert!(
                out.starts_with("Results at ") && out.ends_with(" today."),
                "{out}"
            );
        }
    }
}
