//! `dptext sanitize`: run a mechanism over lines, JSON lines or a CSV column.

use std::io::{BufRead, BufWriter, Write};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use dptext_core::mechanisms::{Mechanism, MechanismSpec};
use dptext_core::{Engine, RandomMode};

/// Input formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// Every line is one value.
    Lines,
    /// Every line is a JSON object; `--field` names the text field.
    Jsonl,
    /// A CSV file with a header; `--field` names the column.
    Csv,
}

/// What to run, on what.
pub struct Job<'a> {
    pub engine: &'a Engine,
    pub spec: MechanismSpec,
    pub mode: RandomMode,
    pub format: Format,
    pub field: Option<String>,
    pub with_cost: bool,
}

/// Streams `input` to `output`, reporting progress on stderr.
pub fn run(job: &Job, input: Box<dyn BufRead>, output: Box<dyn Write>) -> Result<()> {
    let mechanism = job.engine.build(&job.spec)?;
    let mut out = BufWriter::new(output);
    let started = Instant::now();
    let mut progress = Progress::new();
    match job.format {
        Format::Lines => {
            for line in input.lines() {
                let line = line.context("reading input")?;
                let s = job.engine.run(mechanism.as_ref(), &line, &job.mode, &[])?;
                if job.with_cost {
                    serde_json::to_writer(&mut out, &s)?;
                    writeln!(out)?;
                } else {
                    writeln!(out, "{}", s.text)?;
                }
                progress.tick(line.len());
            }
        }
        Format::Jsonl => {
            let field = job
                .field
                .as_deref()
                .context("--format jsonl needs --field")?;
            for (n, line) in input.lines().enumerate() {
                let line = line.context("reading input")?;
                if line.trim().is_empty() {
                    continue;
                }
                let mut v: serde_json::Value = serde_json::from_str(&line)
                    .with_context(|| format!("line {}: not JSON", n + 1))?;
                match v.get(field) {
                    Some(serde_json::Value::String(t)) => {
                        let s = sanitize(job, mechanism.as_ref(), t)?;
                        progress.tick(t.len());
                        v[field] = serde_json::Value::String(s.text);
                        if job.with_cost {
                            v["dptext_cost"] = serde_json::to_value(&s.cost)?;
                        }
                    }
                    // Absent or null: nothing to protect.
                    None | Some(serde_json::Value::Null) => {}
                    // Fail closed: never pass a non-text value through raw.
                    Some(other) => bail!(
                        "line {}: field {field:?} is not a string ({}): refusing to pass it through",
                        n + 1,
                        match other {
                            serde_json::Value::Array(_) => "an array",
                            serde_json::Value::Object(_) => "an object",
                            _ => "a number or boolean",
                        }
                    ),
                }
                serde_json::to_writer(&mut out, &v)?;
                writeln!(out)?;
            }
        }
        Format::Csv => {
            let field = job.field.as_deref().context("--format csv needs --field")?;
            let mut rdr = csv::Reader::from_reader(input);
            let headers = rdr.headers()?.clone();
            let Some(col) = headers.iter().position(|h| h == field) else {
                bail!("no column {field:?} in the CSV header {headers:?}");
            };
            let mut wtr = csv::Writer::from_writer(&mut out);
            wtr.write_record(&headers)?;
            for rec in rdr.records() {
                let rec = rec?;
                let mut fields: Vec<String> = rec.iter().map(str::to_owned).collect();
                if let Some(t) = fields.get(col) {
                    let s = sanitize(job, mechanism.as_ref(), t)?;
                    progress.tick(t.len());
                    fields[col] = s.text;
                }
                wtr.write_record(&fields)?;
            }
            wtr.flush()?;
        }
    }
    out.flush()?;
    eprintln!(
        "sanitized {} values ({} bytes) in {:.2}s",
        progress.values,
        progress.bytes,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn sanitize(job: &Job, m: &dyn Mechanism, t: &str) -> Result<dptext_core::mechanisms::Sanitized> {
    Ok(job.engine.run(m, t, &job.mode, &[])?)
}

struct Progress {
    values: u64,
    bytes: u64,
    last: Instant,
    started: Instant,
}

impl Progress {
    fn new() -> Self {
        Progress {
            values: 0,
            bytes: 0,
            last: Instant::now(),
            started: Instant::now(),
        }
    }

    fn tick(&mut self, bytes: usize) {
        self.values += 1;
        self.bytes += bytes as u64;
        if self.last.elapsed().as_secs() >= 5 {
            self.last = Instant::now();
            let secs = self.started.elapsed().as_secs_f64();
            eprintln!(
                "... {} values, {:.0} values/s",
                self.values,
                self.values as f64 / secs
            );
        }
    }
}
