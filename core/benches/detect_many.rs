//! Detection across values: `Detector::detect` value by value against
//! `Detector::detect_many` over chunks of values, with one ONNX Runtime
//! thread, in the same process; prints values/s of each, their ratio, and
//! where the time goes (tokenizing, the model's calls, the rest).
//!
//! Three inputs from the 60 clinical notes of tests/data/clinical: their
//! lines with letters (one-line values: a name, an address, a heading, a
//! short remark, as a column of fields holds them), the notes cut at blank
//! lines (a section, a header block: short notes), and the notes whole
//! (about 1.7 KB each).
//!
//! ```sh
//! DPTEXT_ASSETS=$PWD/target/assets cargo bench -p dptext-core --bench detect_many
//! ```
//!
//! `DETECT_BENCH_REPS` (default 2): runs of each path, the fastest kept.
//! `DETECT_BENCH_BATCHES` (default `4,16,64`): rows per model call tried
//! for `detect_many`; value by value runs at the default, 4.
//! `DETECT_BENCH_CHUNK` (default 64): values per `detect_many` call, as
//! the CLI reads them.

use std::time::Instant;

use dptext_core::detect::{annotated, Detector, Span};

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// The clinical notes' texts, markup removed, in name order.
fn notes() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/clinical");
    annotated::read_dir(dir.as_ref())
        .expect("tests/data/clinical")
        .into_iter()
        .map(|(_, note)| note.text)
        .collect()
}

/// The notes cut at `sep`, the pieces with letters.
fn cut(notes: &[String], sep: &str) -> Vec<String> {
    notes
        .iter()
        .flat_map(|n| n.split(sep))
        .filter(|p| p.chars().filter(|c| c.is_alphabetic()).count() >= 2)
        .map(str::to_string)
        .collect()
}

/// The fastest of `reps` runs of `f`, in seconds, and the last run's output.
fn fastest<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        let o = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(o);
    }
    (best, out.expect("at least one run"))
}

/// Rows the model reads for `t`: its windows and its lines with letters
/// (a line of more than a window counts as one: there are none here).
fn rows(d: &Detector, t: &str) -> usize {
    let whole = d.model().tokens(t).expect("tokens").0.len();
    let lines = t
        .split_inclusive('\n')
        .filter(|l| l.chars().filter(|c| c.is_alphabetic()).count() >= 2)
        .count();
    let windows = match whole {
        0 => 0,
        1..=510 => 1,
        n => 1 + (n - 510).div_ceil(446),
    };
    windows + lines
}

fn bench(
    d: &Detector,
    name: &str,
    values: &[String],
    reps: usize,
    batches: &[usize],
    chunk: usize,
) {
    let texts: Vec<&str> = values.iter().map(String::as_str).collect();
    let n = texts.len() as f64;
    let bytes: usize = texts.iter().map(|t| t.len()).sum();
    let rows: usize = texts.iter().map(|t| rows(d, t)).sum();
    println!(
        "{name}: {} values, {} bytes each on average, {:.1} model rows each",
        texts.len(),
        bytes / texts.len().max(1),
        rows as f64 / n
    );
    d.model().set_batch(4);
    let (tok, _) = fastest(reps, || {
        for t in &texts {
            d.model().tokens(t).expect("tokens");
            for l in t.split_inclusive('\n') {
                d.model().tokens(l).expect("tokens");
            }
        }
    });
    let (alone, spans): (f64, Vec<Vec<Span>>) = fastest(reps, || {
        texts.iter().map(|t| d.detect(t).expect("detect")).collect()
    });
    let (alone_model, _) = fastest(reps, || {
        for t in &texts {
            d.model().spans_many(&[t], true);
        }
    });
    println!(
        "  value by value (detect, 4 rows a call): {:7.1} values/s   model {:4.0}% of it (tokenizing {:.0}%), rules and dictionaries {:.0}%",
        n / alone,
        100.0 * alone_model / alone,
        100.0 * tok / alone,
        100.0 * (alone - alone_model) / alone
    );
    for &rows in batches {
        d.model().set_batch(rows);
        let (many, got) = fastest(reps, || {
            texts
                .chunks(chunk)
                .flat_map(|c| d.detect_many(c))
                .map(|r| r.expect("detect_many"))
                .collect::<Vec<_>>()
        });
        assert_eq!(got, spans, "detect_many must find what detect finds");
        let (many_model, _) = fastest(reps, || {
            for c in texts.chunks(chunk) {
                d.model().spans_many(c, true);
            }
        });
        println!(
            "  detect_many, {chunk} values, {rows:2} rows a call: {:7.1} values/s   model {:4.0}%   ratio {:.2}x",
            n / many,
            100.0 * many_model / many,
            alone / many
        );
    }
    d.model().set_batch(4);
}

/// What a model call costs beyond its rows: the same rows (short lines of
/// 5 tokens, then whole windows of about 490) run one a call and 16 a call.
fn per_call(d: &Detector, reps: usize) {
    let short: Vec<String> = (0..256)
        .map(|i| format!("Seen by Maria Lopez {i}"))
        .collect();
    let long: Vec<String> = (0..16)
        .map(|i| {
            format!(
                "{i} {}",
                "the patient reported mild pain and was given fluids. ".repeat(44)
            )
        })
        .collect();
    for (name, texts) in [("short rows", &short), ("long rows", &long)] {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let tokens = d.model().tokens(texts[0]).expect("tokens").0.len();
        let mut line = format!("  {name} ({tokens} tokens):");
        for rows in [1, 16] {
            d.model().set_batch(rows);
            let (t, _) = fastest(reps, || d.model().spans_many(&texts, false));
            line += &format!(
                " {:.0} us a row at {rows} a call;",
                1e6 * t / texts.len() as f64
            );
        }
        println!("{}", line.trim_end_matches(';'));
    }
    d.model().set_batch(4);
}

fn main() {
    let reps: usize = env_or("DETECT_BENCH_REPS", "2")
        .parse()
        .expect("DETECT_BENCH_REPS");
    let chunk: usize = env_or("DETECT_BENCH_CHUNK", "64")
        .parse()
        .expect("DETECT_BENCH_CHUNK");
    let batches: Vec<usize> = env_or("DETECT_BENCH_BATCHES", "4,16,64")
        .split(',')
        .map(|b| b.trim().parse().expect("DETECT_BENCH_BATCHES"))
        .collect();
    let dir = dptext_core::assets::resolve_dir(None);
    let d = match Detector::load(&dir, 1) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no detection model ({e}): run `dptext assets fetch` or set DPTEXT_ASSETS");
            std::process::exit(1);
        }
    };
    let notes = notes();
    let lines = cut(&notes, "\n");
    let sections = cut(&notes, "\n\n");
    // Warm-up: the first calls allocate ONNX Runtime's buffers.
    let warm: Vec<&str> = sections.iter().take(32).map(String::as_str).collect();
    d.detect_many(&warm);
    println!("detection, 1 ONNX Runtime thread, fastest of {reps}:");
    bench(&d, "one-line values", &lines, reps, &batches, chunk);
    bench(&d, "sections", &sections, reps, &batches, chunk);
    bench(&d, "clinical notes", &notes, reps, &batches, chunk);
    println!("model calls alone:");
    per_call(&d, reps);
}
