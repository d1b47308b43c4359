//! `dptext eval-detect`: detection precision and recall per label.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use dptext_core::detect::{eval, Label};
use dptext_core::{Engine, EngineConfig};

use crate::progress;

/// Scores detection on a labelled JSON-lines file and prints a table.
pub fn eval_detect(dir: &Path, file: &Path) -> Result<()> {
    let mut config = EngineConfig::new(dir.to_path_buf());
    config.model_threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let engine = Engine::new(config);
    let text = fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut totals = std::collections::BTreeMap::new();
    let started = std::time::Instant::now();
    let texts: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let bar = progress::items(texts.len() as u64, "detecting");
    for &(i, line) in &texts {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("line {}", i + 1))?;
        let t = v["text"]
            .as_str()
            .with_context(|| format!("line {}: no text", i + 1))?;
        let mut gold = Vec::new();
        for s in v["spans"].as_array().into_iter().flatten() {
            let (Some(a), Some(b), Some(l)) = (s[0].as_u64(), s[1].as_u64(), s[2].as_str()) else {
                anyhow::bail!("line {}: bad span {s}", i + 1);
            };
            gold.push((a as usize, b as usize, l.parse::<Label>()?));
        }
        let pred: Vec<eval::Labelled> = engine
            .detect(t)?
            .iter()
            .map(|s| (s.start, s.end, s.label))
            .collect();
        eval::add(&mut totals, &gold, &pred);
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!(
        "{} texts in {:.1}s",
        texts.len(),
        started.elapsed().as_secs_f64()
    );
    println!("| label | gold | recall (overlap) | precision (overlap) | recall (strict) | precision (strict) |");
    println!("|---|---|---|---|---|---|");
    for (label, (strict, overlap)) in &totals {
        println!(
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
