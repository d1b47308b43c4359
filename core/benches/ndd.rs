//! NDD: ours (original distributions once per sentence, every masked copy
//! of every candidate batched) against the naive computation (per
//! candidate: the original's masked copies at the neighbours recomputed and
//! run in one batch with the candidate's), in the same process, on the demo
//! notes' sentences that hold PII, with up to 8 distinct surrogate
//! candidates per span.
//!
//! ```sh
//! DPTEXT_ASSETS=target/assets cargo bench -p dptext-core --bench ndd
//! # options (env): NDD_BENCH_NOTES (default 30), DPTEXT_DEVICE (cpu|cuda),
//! # DPTEXT_MLM_DIR (default models/mlm), NDD_BENCH_THREADS (default 1),
//! # DPTEXT_ORT_LIB (another ONNX Runtime library), DPTEXT_DEMO_DATA (the notes),
//! # NDD_BENCH_BATCH (rows per model call, default 64),
//! # NDD_BENCH_REPS (runs of each computation, the fastest counts; default 1),
//! # NDD_BENCH_DUMP (a path: write every NDD term there as JSON, for
//! # bench/ndd_schedules.py, and time nothing)
//! ```
//!
//! A third run picks each span's winner with [`Scorer::choose`] (exact
//! pruning by lower bounds, a note's sentences sharing model calls, as
//! `ndd_distort` does) and must agree with the naive winners.
//!
//! With `NDD_BENCH_THREADS=T > 1`, every computation runs with the T
//! threads laid out two ways: one session with T intra-op threads, and T
//! single-threaded sessions (the default, `MaskedLm::load`); the ratios
//! compare the fastest naive layout with the fastest of ours.
//!
//! Prints sentences/s of each and their ratios (the issue's target: >= 5x).

use std::path::PathBuf;
use std::time::Instant;

use dptext_core::detect::{self, model::NerModel};
use dptext_core::mechanisms::ndd::{sentences, Divergence, Scorer, SpanCandidates, Window};
use dptext_core::mechanisms::surrogates::full_entity;
use dptext_core::mlm::MaskedLm;
use dptext_core::runtime::Device;
use rand::SeedableRng;

fn notes() -> Vec<String> {
    let path = std::env::var("DPTEXT_DEMO_DATA")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../sql/demo_data.sql").into());
    let sql = std::fs::read_to_string(&path).expect("sql/demo_data.sql (or DPTEXT_DEMO_DATA)");
    // Each row is (id, 'patient', 'note'); the note is the last quoted string.
    let re = regex::Regex::new(r"'((?:[^']|'')*)'\)").expect("regex");
    re.captures_iter(&sql)
        .map(|c| c[1].replace("''", "'"))
        .collect()
}

fn main() {
    let assets = dptext_core::assets::resolve_dir(None);
    let env = |name: &str, default: usize| -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let device: Device = std::env::var("DPTEXT_DEVICE")
        .unwrap_or_else(|_| "cpu".into())
        .parse()
        .expect("device");
    let threads = env("NDD_BENCH_THREADS", 1).max(1);
    let n_notes = env("NDD_BENCH_NOTES", 30);
    let batch = env("NDD_BENCH_BATCH", 64);
    let reps = env("NDD_BENCH_REPS", 1).max(1);
    let mlm_dir = std::env::var_os("DPTEXT_MLM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models/mlm")));
    let lib = assets.join(dptext_core::detect::model::ORT_LIB);
    let load = |sessions: usize, intra: usize| {
        MaskedLm::load_sessions(&lib, &mlm_dir, sessions, intra, device, batch)
            .expect("masked LM (run `dptext assets fetch`)")
    };
    // Layouts of the threads: one session, and the default pool.
    let mut layouts = vec![(format!("1 session x {threads} thread(s)"), load(1, threads))];
    if threads > 1 && device == Device::Cpu {
        layouts.push((format!("{threads} sessions x 1 thread"), load(threads, 1)));
    }
    let mlm = &layouts[0].1;
    let ner = NerModel::load(&assets, threads).expect("detection model");
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    // The work: per note, its sentences with PII (tokens and up to 8
    // candidates per span).
    let mut notes_work: Vec<Vec<Window>> = Vec::new();
    for note in notes().iter().take(n_notes) {
        let mut work = Vec::new();
        let spans = detect::detect(note, Some(&ner)).expect("detect");
        for (s0, s1) in sentences(note, &spans) {
            let enc = mlm.encode(&note[s0..s1]).expect("encode");
            let mut scs = Vec::new();
            for s in spans.iter().filter(|s| s.start >= s0 && s.end <= s1) {
                let toks: Vec<usize> = (0..enc.ids.len())
                    .filter(|&t| enc.offsets[t].0 < s.end - s0 && enc.offsets[t].1 > s.start - s0)
                    .collect();
                let (Some(&i), Some(&j)) = (toks.first(), toks.last()) else {
                    continue;
                };
                // Like the distorter: 8 distinct candidates, none equal to
                // the original.
                let original = &note[s.start..s.end];
                let mut texts: Vec<String> = Vec::new();
                for _ in 0..32 {
                    let (c, _) = full_entity(s.label, original, &mut rng);
                    if texts.len() < 8 && !c.eq_ignore_ascii_case(original) && !texts.contains(&c) {
                        texts.push(c);
                    }
                }
                let candidates = texts
                    .iter()
                    .map(|c| mlm.encode(c).expect("encode").ids)
                    .collect();
                scs.push(SpanCandidates {
                    start: i,
                    end: j + 1,
                    candidates,
                });
            }
            if !scs.is_empty() && enc.ids.len() + 40 <= mlm.max_tokens() {
                work.push(Window {
                    ids: enc.ids,
                    spans: scs,
                });
            }
        }
        notes_work.push(work);
    }
    // Every term of the work, for bench/ndd_schedules.py, instead of the
    // timings.
    if let Ok(path) = std::env::var("NDD_BENCH_DUMP") {
        let scorer = Scorer::new(mlm, 0.9, Divergence::Kl).expect("scorer");
        let dump: Vec<Vec<serde_json::Value>> = notes_work
            .iter()
            .map(|note| {
                note.iter()
                    .map(|w| {
                        let terms = scorer.score_terms(w).expect("terms");
                        let spans: Vec<Vec<Vec<[f64; 4]>>> = terms
                            .iter()
                            .map(|per| {
                                per.iter()
                                    .map(|ts| {
                                        ts.iter()
                                            .map(|t| {
                                                [
                                                    t.position as f64,
                                                    t.distance as f64,
                                                    t.weight,
                                                    t.divergence,
                                                ]
                                            })
                                            .collect()
                                    })
                                    .collect()
                            })
                            .collect();
                        serde_json::json!({ "tokens": w.ids.len(), "spans": spans })
                    })
                    .collect()
            })
            .collect();
        std::fs::write(&path, serde_json::to_string(&dump).expect("json")).expect("write the dump");
        eprintln!("ndd bench: terms written to {path}");
        return;
    }
    let work: Vec<&Window> = notes_work.iter().flatten().collect();
    let spans: usize = work.iter().map(|w| w.spans.len()).sum();
    let n = work.len() as f64;
    eprintln!(
        "ndd bench: {} sentences with {spans} spans from {n_notes} demo notes, 8 candidates each, device {}, {threads} thread(s)",
        work.len(),
        mlm.device().name(),
    );
    // Per layout: naive, ours (full evaluation) and ours with pruning, as
    // (seconds, masked copies); the winners of each for the checks.
    let mut best = [f64::INFINITY; 3];
    let mut results = None;
    for (name, mlm) in &layouts {
        let scorer = Scorer::new(mlm, 0.9, Divergence::Kl).expect("scorer");
        // Warm-up, then each timed over the same work.
        let _ = scorer.score(work[0]);
        // The fastest of `reps` runs, and the masked copies of one.
        let timed = |f: &mut dyn FnMut()| {
            let mut best = (f64::INFINITY, 0);
            for _ in 0..reps {
                let r = mlm.rows_run();
                let t = Instant::now();
                f();
                best = (best.0.min(t.elapsed().as_secs_f64()), mlm.rows_run() - r);
            }
            best
        };
        let mut naive = Vec::new();
        let mut ours = Vec::new();
        let mut chosen = Vec::new();
        let runs = [
            timed(&mut || {
                naive = work
                    .iter()
                    .map(|w| scorer.score_naive(w).expect("naive"))
                    .collect()
            }),
            timed(&mut || {
                ours = work
                    .iter()
                    .map(|w| scorer.score(w).expect("score"))
                    .collect()
            }),
            timed(&mut || {
                chosen = notes_work
                    .iter()
                    .flat_map(|note| scorer.choose(note).expect("choose"))
                    .collect()
            }),
        ];
        println!("{name}:");
        for ((label, (secs, rows)), b) in [
            "naive:                    ",
            "ours, caching + batching: ",
            "ours, + exact pruning:    ",
        ]
        .iter()
        .zip(runs)
        .zip(best.iter_mut())
        {
            println!(
                "  {label} {:.2} sentences/s ({secs:.1} s, {rows} masked copies)",
                n / secs
            );
            *b = b.min(secs);
        }
        println!(
            "  same layout: caching + batching {:.2}x, with pruning {:.2}x",
            runs[0].0 / runs[1].0,
            runs[0].0 / runs[2].0
        );
        if results.is_none() {
            results = Some((naive, ours, chosen));
        } else if let Some((n0, _, c0)) = &results {
            assert_eq!(&chosen, c0, "the layouts chose differently");
            assert_eq!(&naive, n0, "the layouts scored differently");
        }
    }
    let Some((naive, ours, chosen)) = results else {
        return;
    };
    let max_diff = ours
        .iter()
        .flatten()
        .flatten()
        .zip(naive.iter().flatten().flatten())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    // The pruned search must pick the naive computation's winner with its
    // NDD (first of equals, as `min_by` does). On the CPU that is exact; on
    // CUDA a row's logits depend a little on the rows batched with it, so
    // NDDs are equal within `tol` and a winner may differ only where the
    // naive scores of the two candidates are that close (a near-tie).
    let tol = if device == Device::Cpu { 0.0 } else { 1e-4 };
    let (mut same, mut close, mut ties, mut total) = (0, 0, 0, 0);
    for (per_sentence, choices) in naive.iter().zip(&chosen) {
        for (scores, choice) in per_sentence.iter().zip(choices) {
            total += 1;
            let want = scores
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .map(|(i, &v)| (i, v));
            let got = choice.map(|c| (c.index, c.ndd));
            match (want, got) {
                _ if want == got => same += 1,
                (Some((wi, wv)), Some((gi, gv))) if wi == gi && (wv - gv).abs() <= tol => {
                    close += 1
                }
                (Some((_, wv)), Some((gi, gv)))
                    if (scores[gi] - wv).abs() <= tol && (gv - wv).abs() <= tol =>
                {
                    ties += 1
                }
                _ => {}
            }
        }
    }
    println!(
        "ratio caching + batching / naive: {:.2}x (fastest layouts; largest score difference {max_diff:.2e})",
        best[0] / best[1]
    );
    println!(
        "ratio with pruning / naive: {:.2}x (fastest layouts; same winner and NDD for {same} of {total} spans, \
         same winner with NDD within {tol:e} for {close}, a near-tie's other candidate for {ties})",
        best[0] / best[2]
    );
    assert_eq!(
        same + close + ties,
        total,
        "the pruned search changed a winner"
    );
}
