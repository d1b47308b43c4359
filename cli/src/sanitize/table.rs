//! `--format csv`: sanitize named columns, keep the others; with `--cost`
//! a column `<column>_cost` (the cost as compact JSON) is appended per
//! sanitized column.

use std::io::{BufRead, Write};

use anyhow::{anyhow, bail, Context, Result};
use indicatif::ProgressBar;

use super::Job;

/// Streams the CSV; `count(bytes)` is called for every sanitized value.
pub fn run(
    job: &Job,
    input: Box<dyn BufRead>,
    out: &mut dyn Write,
    bar: &ProgressBar,
    count: &mut dyn FnMut(usize),
) -> Result<()> {
    let mut rdr = csv::Reader::from_reader(input);
    let headers = rdr.headers().context("reading the CSV header")?.clone();
    let header_list = || {
        headers
            .iter()
            .map(|h| format!("{h:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut cols = Vec::with_capacity(job.targets.len());
    for t in &job.targets {
        let mut hits = headers.iter().enumerate().filter(|(_, h)| *h == t.name);
        let Some((col, _)) = hits.next() else {
            bail!(
                "no column {:?} in the CSV header ({}): nothing was written",
                t.name,
                header_list()
            );
        };
        if hits.next().is_some() {
            bail!("the CSV header has column {:?} more than once", t.name);
        }
        cols.push(col);
    }
    let mut header: Vec<String> = headers.iter().map(str::to_owned).collect();
    if job.with_cost {
        for t in &job.targets {
            let name = format!("{}_cost", t.name);
            if header.contains(&name) {
                bail!("the CSV already has a column {name:?}, which --cost would overwrite");
            }
            header.push(name);
        }
    }
    let mut wtr = csv::Writer::from_writer(out);
    wtr.write_record(&header)?;
    let mut rec = csv::StringRecord::new();
    let read = || -> super::Next<(u64, Vec<String>, u64)> {
        match rdr.read_record(&mut rec).context("reading the CSV") {
            Ok(false) => return None,
            Err(e) => return Some(Err(e)),
            Ok(true) => {}
        }
        let row = rec.position().map_or(0, |p| p.line());
        let fields: Vec<String> = rec.iter().map(str::to_owned).collect();
        if let Some(t) = cols.iter().position(|&c| c >= fields.len()) {
            return Some(Err(anyhow!(
                "CSV line {row}: no value for column {:?}",
                job.targets[t].name
            )));
        }
        Some(Ok(Some((row, fields, rdr.position().byte()))))
    };
    super::chunked(read, |chunk| {
        let values: Vec<Vec<Option<&str>>> = chunk
            .iter()
            .map(|(_, fields, _)| {
                cols.iter()
                    .map(|&c| fields.get(c).map(String::as_str))
                    .collect()
            })
            .collect();
        let outs = job.sanitize_chunk(&values);
        for ((row, mut fields, byte), outs) in chunk.into_iter().zip(outs) {
            let mut costs = Vec::new();
            for (&col, outcome) in cols.iter().zip(outs) {
                let s =
                    super::sanitized(Some(outcome)).with_context(|| format!("CSV line {row}"))?;
                count(fields[col].len());
                fields[col] = s.text;
                if job.with_cost {
                    costs.push(serde_json::to_string(&s.cost)?);
                }
            }
            fields.extend(costs);
            wtr.write_record(&fields)?;
            bar.set_position(byte);
        }
        Ok(())
    })?;
    wtr.flush()?;
    Ok(())
}
