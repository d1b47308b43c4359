//! `dptext sanitize`: run mechanisms over lines, JSON-line fields or CSV
//! columns.
//!
//! Every run fails closed: a field or column that does not exist, a line
//! without a field, or a value that is not text stops the run with an error
//! naming it, and nothing at all is written (see [`crate::output`]).

mod fields;
pub(crate) mod jsonl;
mod table;

use std::io::{BufRead, Write};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use dptext_core::mechanisms::{Mechanism, Sanitized};
use dptext_core::{Engine, RandomMode};
use indicatif::ProgressBar;

pub use fields::{parse_spec, resolve, FieldArg};

/// Input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Every line is one value.
    Lines,
    /// Every line is a JSON object; `--field` names the text fields.
    Jsonl,
    /// A CSV file with a header; `--field` names the columns.
    Csv,
}

/// A field bound to its built mechanism.
pub struct Target {
    /// The JSON key or CSV column (empty for `--format lines`).
    pub name: String,
    /// The mechanism to run on it.
    pub mechanism: std::sync::Arc<dyn Mechanism>,
}

/// What to run, on what.
pub struct Job<'a> {
    /// The engine the mechanisms were built by.
    pub engine: &'a Engine,
    /// For `lines` exactly one target; for `jsonl` and `csv` one per `--field`.
    pub targets: Vec<Target>,
    /// Seeded, keyed or fresh randomness.
    pub mode: RandomMode,
    /// How the input is laid out.
    pub format: Format,
    /// Report each value's privacy cost.
    pub with_cost: bool,
}

/// What a run did, for the summary line.
#[derive(Default)]
struct Counts {
    values: u64,
    bytes: u64,
}

/// Sanitizes `input` into `out`; the bar follows the input's bytes.
pub fn run(
    job: &Job,
    input: Box<dyn BufRead>,
    out: &mut dyn Write,
    bar: &ProgressBar,
) -> Result<()> {
    let started = Instant::now();
    let mut counts = Counts::default();
    match job.format {
        Format::Lines => lines(job, input, out, bar, &mut counts)?,
        Format::Jsonl => json_lines(job, input, out, bar, &mut counts)?,
        Format::Csv => table::run(job, input, out, bar, &mut |n| counts.add(n))?,
    }
    out.flush().context("writing the output")?;
    bar.finish_and_clear();
    eprintln!(
        "sanitized {} values ({} bytes) in {:.2}s",
        counts.values,
        counts.bytes,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

impl Counts {
    fn add(&mut self, bytes: usize) {
        self.values += 1;
        self.bytes += bytes as u64;
    }
}

impl Job<'_> {
    /// Runs the mechanism of target `i` on `text`.
    fn sanitize(&self, i: usize, text: &str) -> Result<Sanitized> {
        let t = &self.targets[i];
        self.engine
            .run(t.mechanism.as_ref(), text, &self.mode, &[])
            .with_context(|| {
                if t.name.is_empty() {
                    "sanitizing".to_string()
                } else {
                    format!("sanitizing {:?}", t.name)
                }
            })
    }
}

/// `--format lines`: one value a line; with `--cost` each output line is a
/// JSON object `{"text": ..., "cost": {...}}`.
fn lines(
    job: &Job,
    input: Box<dyn BufRead>,
    out: &mut dyn Write,
    bar: &ProgressBar,
    counts: &mut Counts,
) -> Result<()> {
    for line in input.lines() {
        let line = line.context("reading input")?;
        let s = job.sanitize(0, &line)?;
        if job.with_cost {
            serde_json::to_writer(&mut *out, &s)?;
            writeln!(out)?;
        } else {
            writeln!(out, "{}", s.text)?;
        }
        counts.add(line.len());
        bar.inc(line.len() as u64 + 1);
    }
    Ok(())
}

/// `--format jsonl`: each field's string replaced in place; with `--cost` a
/// key `<field>_cost` holding the cost object is appended to the line.
fn json_lines(
    job: &Job,
    input: Box<dyn BufRead>,
    out: &mut dyn Write,
    bar: &ProgressBar,
    counts: &mut Counts,
) -> Result<()> {
    let names: Vec<&str> = job.targets.iter().map(|t| t.name.as_str()).collect();
    let cost_keys: Vec<String> = names.iter().map(|n| format!("{n}_cost")).collect();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let line = line.context("reading input")?;
        bar.inc(line.len() as u64 + 1);
        if line.trim().is_empty() {
            continue;
        }
        let found = jsonl::find(&line, n, &names)?;
        let mut replace = Vec::new();
        let mut extra = Vec::new();
        for (t, f) in found.into_iter().enumerate() {
            let cost = match &f.text {
                Some(text) => {
                    let s = job.sanitize(t, text).with_context(|| format!("line {n}"))?;
                    counts.add(text.len());
                    replace.push((f.range, serde_json::to_string(&s.text)?));
                    serde_json::to_string(&s.cost)?
                }
                // Null: nothing to protect, nothing spent.
                None => "null".to_string(),
            };
            if job.with_cost {
                if jsonl::has_key(&line, &cost_keys[t]) {
                    bail!(
                        "line {n}: the input already has a key {:?}, which --cost would overwrite",
                        cost_keys[t]
                    );
                }
                extra.push(format!("{}:{cost}", serde_json::to_string(&cost_keys[t])?));
            }
        }
        writeln!(out, "{}", jsonl::splice(&line, &replace, &extra)?)?;
    }
    Ok(())
}
