//! `dptext eval-detect`: detection recall and precision.
//!
//! Two inputs: a directory of annotated notes (`{{CATEGORY|text}}` markup,
//! `tests/data/clinical/`), scored per HIPAA category, span- and
//! word-level; or a labelled JSON-lines file (`{"text": ..., "spans":
//! [[start, end, label], ...]}`, the older template set), scored per label.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use dptext_core::detect::annotated::{self, Note};
use dptext_core::detect::eval::{self, Report};
use dptext_core::detect::Label;
use dptext_core::Engine;

use crate::progress;
use crate::sanitize::CHUNK;

/// What `eval-detect` prints besides the tables, and what it detects with.
#[derive(Debug, Clone)]
pub struct Options {
    /// Print every missed gold span and every wrong prediction.
    pub errors: bool,
    /// Custom recognizers (a JSON file).
    pub recognizers: Option<PathBuf>,
    /// Engine settings (`--detect-batch`, alias `--batch`: lines per
    /// detection-model call).
    pub engine: crate::engine_flags::EngineFlags,
}

/// Reads a custom recognizers file (docs/detection.md).
pub fn read_recognizers(
    path: &Path,
) -> Result<std::sync::Arc<dptext_core::detect::custom::Custom>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let custom = dptext_core::detect::custom::Custom::from_json(&text)
        .with_context(|| format!("recognizers in {}", path.display()))?;
    Ok(std::sync::Arc::new(custom))
}

fn engine(dir: &Path, opts: &Options) -> Result<Engine> {
    let engine = Engine::new(opts.engine.config(dir));
    if let Some(path) = &opts.recognizers {
        engine.set_recognizers(read_recognizers(path)?);
    }
    Ok(engine)
}

/// Scores detection on `path` (a directory of notes or a JSON-lines file).
pub fn eval_detect(dir: &Path, path: &Path, opts: Options) -> Result<()> {
    if path.is_dir() {
        eval_notes(dir, path, opts)
    } else {
        eval_jsonl(dir, path, &opts)
    }
}

/// The annotated notes of a directory (`*.txt`), in name order.
pub fn read_notes(path: &Path) -> Result<Vec<(PathBuf, Note)>> {
    let mut files: Vec<PathBuf> = fs::read_dir(path)
        .with_context(|| format!("reading {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no annotated notes (*.txt) in {}", path.display());
    }
    files
        .into_iter()
        .map(|f| {
            let marked =
                fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
            let note = annotated::parse(&marked).with_context(|| f.display().to_string())?;
            Ok((f, note))
        })
        .collect()
}

fn eval_notes(dir: &Path, path: &Path, opts: Options) -> Result<()> {
    let notes = read_notes(path)?;
    let engine = engine(dir, &opts)?;
    let started = std::time::Instant::now();
    let bar = progress::items(notes.len() as u64, "detecting");
    let mut report = Report::default();
    for chunk in notes.chunks(CHUNK) {
        let texts: Vec<&str> = chunk.iter().map(|(_, n)| n.text.as_str()).collect();
        for ((file, note), spans) in chunk.iter().zip(engine.detect_many(&texts)?) {
            let spans = spans.with_context(|| file.display().to_string())?;
            let pred: Vec<eval::Labelled> =
                spans.iter().map(|s| (s.start, s.end, s.label)).collect();
            report.add_note(note, &pred);
            if opts.errors {
                bar.suspend(|| print_errors(file, note, &spans))?;
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    let bytes: usize = notes.iter().map(|(_, n)| n.text.len()).sum();
    outln!(
        "{} notes ({} KB) in {secs:.1}s ({:.1} notes/s)",
        notes.len(),
        bytes / 1024,
        notes.len() as f64 / secs.max(1e-9)
    );
    outln!();
    outln!("| category | label | gold | span recall | protected (any label) | word recall |");
    outln!("|---|---|---|---|---|---|");
    for (c, t) in &report.categories {
        outln!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} |",
            c.as_str(),
            c.label().as_str(),
            t.gold,
            t.recall(),
            t.protected_share(),
            t.word_recall()
        );
    }
    let r = report.recall_total();
    outln!(
        "| **all** | | {} | **{:.3}** | {:.3} | {:.3} |",
        r.gold,
        r.recall(),
        r.protected_share(),
        r.word_recall()
    );
    outln!();
    outln!("| label | predicted | span precision | word precision |");
    outln!("|---|---|---|---|");
    for (l, t) in &report.labels {
        outln!(
            "| {} | {} | {:.3} | {:.3} |",
            l.as_str(),
            t.predicted,
            t.precision(),
            t.word_precision()
        );
    }
    let p = report.precision_total();
    outln!(
        "| **all** | {} | **{:.3}** | {:.3} |",
        p.predicted,
        p.precision(),
        p.word_precision()
    );
    let (n, kept, share) = report.clinical_kept();
    if n > 0 {
        // Annotated drug, lab and anatomy words no predicted span touches.
        outln!();
        outln!("| clinical words | annotated | kept |");
        outln!("|---|---|---|");
        for (c, (a, k)) in &report.clinical {
            outln!(
                "| {} | {a} | {:.3} |",
                c.as_str(),
                if *a == 0 {
                    f64::NAN
                } else {
                    *k as f64 / *a as f64
                }
            );
        }
        outln!("| **all** | {n} | **{share:.3}** ({kept} kept) |");
    }
    Ok(())
}

/// Prints what a note's detection missed and what it got wrong.
fn print_errors(file: &Path, note: &Note, spans: &[dptext_core::detect::Span]) -> Result<()> {
    let name = file
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let t = &note.text;
    let line = |at: usize| t[..at].matches('\n').count() + 1;
    let pred: Vec<eval::Labelled> = spans.iter().map(|s| (s.start, s.end, s.label)).collect();
    for g in &note.gold {
        if !eval::covered(t, g, &pred, Some(g.category.label())) {
            let got: Vec<String> = spans
                .iter()
                .filter(|s| s.start < g.end && g.start < s.end)
                .map(|s| format!("{}:{:?}", s.label.as_str(), &t[s.start..s.end]))
                .collect();
            outln!(
                "MISS {name}:{} {} {:?}  got [{}]",
                line(g.start),
                g.category.as_str(),
                &t[g.start..g.end],
                got.join(", ")
            );
        }
    }
    for s in spans {
        let ok = note
            .gold
            .iter()
            .any(|g| g.category.label() == s.label && g.start < s.end && s.start < g.end);
        if !ok {
            outln!(
                "FP   {name}:{} {} {:?} ({:?})",
                line(s.start),
                s.label.as_str(),
                &t[s.start..s.end],
                s.source
            );
        }
    }
    Ok(())
}

fn eval_jsonl(dir: &Path, file: &Path, opts: &Options) -> Result<()> {
    let engine = engine(dir, opts)?;
    let text = fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut totals = std::collections::BTreeMap::new();
    let started = std::time::Instant::now();
    let texts: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let bar = progress::items(texts.len() as u64, "detecting");
    let mut labelled = Vec::with_capacity(texts.len());
    for &(i, line) in &texts {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("line {}", i + 1))?;
        let t = v["text"]
            .as_str()
            .with_context(|| format!("line {}: no text", i + 1))?
            .to_string();
        let mut gold = Vec::new();
        for s in v["spans"].as_array().into_iter().flatten() {
            let (Some(a), Some(b), Some(l)) = (s[0].as_u64(), s[1].as_u64(), s[2].as_str()) else {
                bail!("line {}: bad span {s}", i + 1);
            };
            gold.push((a as usize, b as usize, l.parse::<Label>()?));
        }
        labelled.push((i, t, gold));
    }
    for chunk in labelled.chunks(CHUNK) {
        let texts: Vec<&str> = chunk.iter().map(|(_, t, _)| t.as_str()).collect();
        for ((i, _, gold), spans) in chunk.iter().zip(engine.detect_many(&texts)?) {
            let pred: Vec<eval::Labelled> = spans
                .with_context(|| format!("line {}", i + 1))?
                .iter()
                .map(|s| (s.start, s.end, s.label))
                .collect();
            eval::add(&mut totals, gold, &pred);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    outln!(
        "{} texts in {:.1}s",
        texts.len(),
        started.elapsed().as_secs_f64()
    );
    outln!("| label | gold | recall (overlap) | precision (overlap) | recall (strict) | precision (strict) |");
    outln!("|---|---|---|---|---|---|");
    for (label, (strict, overlap)) in &totals {
        outln!(
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
            label.as_str(),
            strict.gold,
            overlap.recall(),
            overlap.precision(),
            strict.recall(),
            strict.precision()
        );
    }
    Ok(())
}
