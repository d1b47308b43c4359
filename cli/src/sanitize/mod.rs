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

/// Values read before they are sanitized (or detected) together: a
/// mechanism that runs detection shares its model calls among them
/// ([`Engine::run_many`], [`Engine::detect_many`]).
pub(crate) const CHUNK: usize = 64;

/// What a reader hands [`chunked`]: `None` when the input is over, else a
/// record, or `Ok(None)` for one to skip.
type Next<T> = Option<Result<Option<T>>>;

/// One target's output for one value: `None` where there was nothing to
/// sanitize (JSON null).
type Outcome = Option<Result<Sanitized>>;

impl Job<'_> {
    /// Runs the mechanism of target `i` on each of `texts` together.
    fn sanitize_many(&self, i: usize, texts: &[&str]) -> Vec<Result<Sanitized>> {
        let t = &self.targets[i];
        self.engine
            .run_many(t.mechanism.as_ref(), texts, &self.mode, &[])
            .into_iter()
            .map(|r| {
                r.with_context(|| {
                    if t.name.is_empty() {
                        "sanitizing".to_string()
                    } else {
                        format!("sanitizing {:?}", t.name)
                    }
                })
            })
            .collect()
    }

    /// Sanitizes a chunk of records: `values[r][t]` is record `r`'s value
    /// for target `t` (`None`: nothing to sanitize), and so is the result;
    /// each target runs once over the whole chunk.
    fn sanitize_chunk(&self, values: &[Vec<Option<&str>>]) -> Vec<Vec<Outcome>> {
        let mut out: Vec<Vec<Outcome>> = values
            .iter()
            .map(|r| r.iter().map(|_| None).collect())
            .collect();
        for (t, _) in self.targets.iter().enumerate() {
            let (at, texts): (Vec<usize>, Vec<&str>) = values
                .iter()
                .enumerate()
                .filter_map(|(r, v)| Some((r, (*v.get(t)?)?)))
                .unzip();
            for (r, s) in at.into_iter().zip(self.sanitize_many(t, &texts)) {
                out[r][t] = Some(s);
            }
        }
        out
    }
}

/// Reads records with `next` (`None`: the input is over; `Ok(None)`: a
/// record to skip) and hands them to `emit` [`CHUNK`] at a time, in order.
/// A record that cannot be read ends its chunk: the records before it are
/// emitted (the first error among them wins), then its error is returned,
/// as when records were sanitized one by one.
fn chunked<T>(
    mut next: impl FnMut() -> Next<T>,
    mut emit: impl FnMut(Vec<T>) -> Result<()>,
) -> Result<()> {
    loop {
        let mut items = Vec::with_capacity(CHUNK);
        let mut stop = None;
        let mut done = false;
        while items.len() < CHUNK {
            match next() {
                None => {
                    done = true;
                    break;
                }
                Some(Err(e)) => {
                    stop = Some(e);
                    break;
                }
                Some(Ok(Some(item))) => items.push(item),
                Some(Ok(None)) => {}
            }
        }
        if !items.is_empty() {
            emit(items)?;
        }
        if let Some(e) = stop {
            return Err(e);
        }
        if done {
            return Ok(());
        }
    }
}

/// The outcome of a value that had one.
fn sanitized(outcome: Option<Outcome>) -> Result<Sanitized> {
    outcome
        .flatten()
        .unwrap_or_else(|| Err(anyhow::anyhow!("a value was not sanitized")))
}

/// An input line that could not be read, named by its number: most often
/// bytes that are not UTF-8 (a file in Latin-1 or Windows-1252).
fn read_error(e: std::io::Error, line: usize) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::InvalidData {
        anyhow::anyhow!(
            "line {line} of the input is not valid UTF-8 (convert the file first, e.g. `iconv -f WINDOWS-1252 -t UTF-8`)"
        )
    } else {
        anyhow::Error::new(e).context(format!("reading line {line} of the input"))
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
    let mut lines = input.lines().enumerate();
    chunked(
        || {
            let (i, line) = lines.next()?;
            Some(line.map(Some).map_err(|e| read_error(e, i + 1)))
        },
        |chunk: Vec<String>| {
            let values: Vec<Vec<Option<&str>>> =
                chunk.iter().map(|l| vec![Some(l.as_str())]).collect();
            for (line, outs) in chunk.iter().zip(job.sanitize_chunk(&values)) {
                let s = sanitized(outs.into_iter().next())?;
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
        },
    )
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
    let mut lines = input.lines().enumerate();
    let mut read = || -> Next<(usize, String, Vec<jsonl::Found>)> {
        let (i, line) = lines.next()?;
        let n = i + 1;
        Some(line.map_err(|e| read_error(e, n)).and_then(|line| {
            bar.inc(line.len() as u64 + 1);
            if line.trim().is_empty() {
                return Ok(None);
            }
            let found = jsonl::find(&line, n, &names)?;
            Ok(Some((n, line, found)))
        }))
    };
    chunked(&mut read, |chunk| {
        let values: Vec<Vec<Option<&str>>> = chunk
            .iter()
            .map(|(_, _, found)| found.iter().map(|f| f.text.as_deref()).collect())
            .collect();
        for ((n, line, found), outs) in chunk.iter().zip(job.sanitize_chunk(&values)) {
            let mut replace = Vec::new();
            let mut extra = Vec::new();
            for (t, (f, outcome)) in found.iter().zip(outs).enumerate() {
                let cost = match (&f.text, outcome) {
                    (Some(text), outcome) => {
                        let s = sanitized(Some(outcome)).with_context(|| format!("line {n}"))?;
                        counts.add(text.len());
                        replace.push((f.range.clone(), serde_json::to_string(&s.text)?));
                        serde_json::to_string(&s.cost)?
                    }
                    // Null: nothing to protect, nothing spent.
                    (None, _) => "null".to_string(),
                };
                if job.with_cost {
                    if jsonl::has_key(line, &cost_keys[t]) {
                        bail!(
                            "line {n}: the input already has a key {:?}, which --cost would overwrite",
                            cost_keys[t]
                        );
                    }
                    extra.push(format!("{}:{cost}", serde_json::to_string(&cost_keys[t])?));
                }
            }
            writeln!(out, "{}", jsonl::splice(line, &replace, &extra)?)?;
        }
        Ok(())
    })
}
