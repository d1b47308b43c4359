//! NDD: ours (original distributions once per sentence, every masked copy
//! of every candidate batched) against the naive computation (per
//! candidate: the original recomputed and one batch of its masked copies),
//! in the same process, on the demo notes' sentences that hold PII.
//!
//! ```sh
//! DPTEXT_ASSETS=target/assets cargo bench -p dptext-core --bench ndd
//! # options (env): NDD_BENCH_NOTES (default 30), DPTEXT_DEVICE (cpu|cuda),
//! # DPTEXT_MLM_DIR (default models/mlm), NDD_BENCH_THREADS (default 1),
//! # DPTEXT_ORT_LIB (another ONNX Runtime library), DPTEXT_DEMO_DATA (the notes),
//! # NDD_BENCH_BATCH (rows per model call, default 64)
//! ```
//!
//! Prints sentences/s of each and their ratio (the issue's target: >= 5x).

use std::path::PathBuf;
use std::time::Instant;

use dptext_core::detect::{self, model::NerModel};
use dptext_core::mechanisms::ndd::{sentences, Divergence, Scorer, SpanCandidates};
use dptext_core::mechanisms::replace::full_entity;
use dptext_core::mlm::MaskedLm;
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
    let device = std::env::var("DPTEXT_DEVICE").unwrap_or_else(|_| "cpu".into());
    let threads: usize = std::env::var("NDD_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let n_notes: usize = std::env::var("NDD_BENCH_NOTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let mlm_dir = std::env::var_os("DPTEXT_MLM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models/mlm")));
    let mlm = MaskedLm::load(
        &assets.join(dptext_core::detect::model::ORT_LIB),
        &mlm_dir,
        threads,
        device.parse().expect("device"),
        std::env::var("NDD_BENCH_BATCH")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64),
    )
    .expect("masked LM (run `dptext assets fetch`)");
    let ner = NerModel::load(&assets, threads).expect("detection model");
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    // The work: per sentence with PII, its tokens and 8 candidates per span.
    let mut work: Vec<(Vec<u32>, Vec<SpanCandidates>)> = Vec::new();
    for note in notes().iter().take(n_notes) {
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
                let candidates = (0..8)
                    .map(|_| {
                        let (c, _) = full_entity(s.label, &note[s.start..s.end], &mut rng);
                        mlm.encode(&c).expect("encode").ids
                    })
                    .collect();
                scs.push(SpanCandidates {
                    start: i,
                    end: j + 1,
                    candidates,
                });
            }
            if !scs.is_empty() && enc.ids.len() + 40 <= mlm.max_tokens() {
                work.push((enc.ids, scs));
            }
        }
    }
    let spans: usize = work.iter().map(|w| w.1.len()).sum();
    let scorer = Scorer::new(&mlm, 0.9, Divergence::Kl).expect("scorer");
    eprintln!(
        "ndd bench: {} sentences with {spans} spans from {n_notes} demo notes, 8 candidates each, device {} ({} thread(s))",
        work.len(),
        mlm.device().name(),
        threads
    );
    // Warm-up, then each timed over the same work.
    let _ = scorer.originals(&work[0].0);
    let t = Instant::now();
    let mut ours = Vec::new();
    for (ids, scs) in &work {
        let originals = scorer.originals(ids).expect("originals");
        ours.push(scorer.score(ids, &originals, scs).expect("score"));
    }
    let fast = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut naive = Vec::new();
    for (ids, scs) in &work {
        naive.push(scorer.score_naive(ids, scs).expect("naive"));
    }
    let slow = t.elapsed().as_secs_f64();
    let max_diff = ours
        .iter()
        .flatten()
        .flatten()
        .zip(naive.iter().flatten().flatten())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let n = work.len() as f64;
    println!("naive: {:.2} sentences/s ({slow:.1} s)", n / slow);
    println!("ours:  {:.2} sentences/s ({fast:.1} s)", n / fast);
    println!(
        "ratio ours/naive: {:.2}x (largest score difference {max_diff:.2e})",
        slow / fast
    );
}
