//! Where the values of `dptext eval` and `dptext vocab build` come from:
//! a file's lines, JSON-line fields or CSV cells, or a table's column over
//! a connection, each with its label when one is named; all of them
//! ([`for_each`]) or a seeded sample ([`sample`]).

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use dptext_core::RandomMode;
use rand::Rng;

use crate::sanitize::{jsonl, Format};

/// Where the values come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A file in one of `dptext sanitize`'s formats.
    File {
        /// The file.
        path: PathBuf,
        /// lines, jsonl or csv.
        format: Format,
        /// JSON key or CSV column of the text (jsonl and csv).
        field: Option<String>,
    },
    /// A column of a table, read with `COPY ... TO STDOUT`.
    Table {
        /// A libpq-style connection string (`host=... dbname=...`) or URL.
        dsn: String,
        /// `schema.table` or `table`.
        table: String,
        /// The text column.
        column: String,
    },
}

impl Source {
    /// The source the flags name: a file (with its format and field) or a
    /// table (with its column and connection string), not both.
    pub fn from_flags(
        input: Option<&Path>,
        format: Format,
        field: Option<&str>,
        table: Option<&str>,
        column: Option<&str>,
        dsn: Option<&str>,
    ) -> Result<Source> {
        match (input, table) {
            (Some(path), None) => Ok(Source::File {
                path: path.to_path_buf(),
                format,
                field: field.map(str::to_owned),
            }),
            (None, Some(table)) => {
                if field.is_some() {
                    bail!("--field applies to files; a table's text column is --column");
                }
                Ok(Source::Table {
                    dsn: dsn.context("--table needs --dsn")?.to_owned(),
                    table: table.to_owned(),
                    column: column.context("--table needs --column")?.to_owned(),
                })
            }
            (None, None) => bail!("give an input file, or --table with --column and --dsn"),
            (Some(_), Some(_)) => bail!("give an input file or --table, not both"),
        }
    }
}

/// One sampled value.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The text.
    pub text: String,
    /// Its class, when `--label` was given.
    pub label: Option<String>,
}

/// The sample and what was read to draw it.
#[derive(Debug)]
pub struct Sample {
    /// At most `n` values, in input order.
    pub items: Vec<Item>,
    /// Non-empty values read.
    pub read: usize,
    /// Empty or NULL values skipped.
    pub skipped: usize,
    /// Values longer than the byte limit, skipped.
    pub too_long: usize,
}

/// Reads `source` and keeps a uniform sample of `n` values (reservoir
/// sampling, seeded: the same input and seed give the same sample) among
/// those of at most `max_bytes` bytes (longer ones are counted, not kept:
/// the engine would refuse them).
pub fn sample(
    source: &Source,
    label: Option<&str>,
    n: usize,
    seed: u64,
    max_bytes: usize,
) -> Result<Sample> {
    if n == 0 {
        bail!("--sample must be at least 1");
    }
    let mut reservoir = Reservoir::new(n, seed);
    reservoir.max_bytes = max_bytes;
    for_each(source, label, |text, lab| reservoir.offer(text, lab))?;
    Ok(reservoir.finish())
}

/// Calls `f` with every value of `source` (`None`: NULL) and its label, in
/// input order.
pub fn for_each(
    source: &Source,
    label: Option<&str>,
    mut f: impl FnMut(Option<String>, Option<String>),
) -> Result<()> {
    match source {
        Source::File {
            path,
            format,
            field,
        } => {
            let file =
                fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
            read_file(
                BufReader::new(file),
                *format,
                field.as_deref(),
                label,
                &mut f,
            )
            .with_context(|| format!("reading {}", path.display()))
        }
        Source::Table { dsn, table, column } => read_table(dsn, table, column, label, &mut f),
    }
}

/// Algorithm R over the non-empty values, keeping input order at the end.
struct Reservoir {
    n: usize,
    rng: dptext_core::rng::DpRng,
    kept: Vec<(usize, Item)>,
    seen: usize,
    skipped: usize,
    max_bytes: usize,
    too_long: usize,
}

impl Reservoir {
    fn new(n: usize, seed: u64) -> Self {
        Reservoir {
            n,
            rng: RandomMode::Seeded(seed).rng_for(&[b"dptext eval sample"]),
            kept: Vec::with_capacity(n.min(1 << 16)),
            seen: 0,
            skipped: 0,
            max_bytes: usize::MAX,
            too_long: 0,
        }
    }

    fn offer(&mut self, text: Option<String>, label: Option<String>) {
        let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
            self.skipped += 1;
            return;
        };
        if text.len() > self.max_bytes {
            self.too_long += 1;
            return;
        }
        let item = Item { text, label };
        if self.kept.len() < self.n {
            self.kept.push((self.seen, item));
        } else {
            let j = self.rng.random_range(0..=self.seen);
            if j < self.n {
                self.kept[j] = (self.seen, item);
            }
        }
        self.seen += 1;
    }

    fn finish(mut self) -> Sample {
        self.kept.sort_by_key(|(i, _)| *i);
        Sample {
            items: self.kept.into_iter().map(|(_, it)| it).collect(),
            read: self.seen,
            skipped: self.skipped,
            too_long: self.too_long,
        }
    }
}

fn read_file(
    input: impl BufRead,
    format: Format,
    field: Option<&str>,
    label: Option<&str>,
    out: &mut dyn FnMut(Option<String>, Option<String>),
) -> Result<()> {
    match (format, field) {
        (Format::Lines, None) => {
            if label.is_some() {
                bail!("--label needs --format jsonl or csv (a line has no columns)");
            }
            for (i, line) in input.lines().enumerate() {
                out(
                    Some(line.with_context(|| format!("reading line {} (is it UTF-8?)", i + 1))?),
                    None,
                );
            }
            Ok(())
        }
        (Format::Lines, Some(_)) => {
            bail!("--field applies to --format jsonl and csv; --format lines reads whole lines")
        }
        (Format::Jsonl, Some(f)) => {
            for (i, line) in input.lines().enumerate() {
                let line =
                    line.with_context(|| format!("reading line {} (is it UTF-8?)", i + 1))?;
                if line.trim().is_empty() {
                    continue;
                }
                let text = jsonl::find(&line, i + 1, &[f])?
                    .into_iter()
                    .next()
                    .and_then(|x| x.text);
                let lab = match label {
                    Some(l) => Some(json_label(&line, i + 1, l)?),
                    None => None,
                };
                out(text, lab);
            }
            Ok(())
        }
        (Format::Csv, Some(f)) => read_csv(input, f, label, out),
        (_, None) => bail!("--format jsonl and csv need --field NAME (the JSON key or CSV column)"),
    }
}

/// The label field of a JSON line: a string, or a number or boolean as
/// written (classes such as 0 and 1).
fn json_label(line: &str, n: usize, field: &str) -> Result<String> {
    let v: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("line {n}: not a JSON object"))?;
    match v.get(field) {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(x @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => Ok(x.to_string()),
        Some(_) => bail!("line {n}: label field {field:?} is not a string, number or boolean"),
        None => bail!("line {n}: no label field {field:?}"),
    }
}

/// Offers column `field` (and `label`) of every CSV row.
fn read_csv(
    input: impl Read,
    field: &str,
    label: Option<&str>,
    out: &mut dyn FnMut(Option<String>, Option<String>),
) -> Result<()> {
    let mut reader = csv::Reader::from_reader(input);
    let headers = reader.headers().context("reading the CSV header")?.clone();
    let column = |name: &str| {
        headers.iter().position(|h| h == name).with_context(|| {
            format!(
                "no column {name:?} in the CSV header (columns: {})",
                headers.iter().collect::<Vec<_>>().join(", ")
            )
        })
    };
    let text_col = column(field)?;
    let label_col = label.map(column).transpose()?;
    for (i, record) in reader.records().enumerate() {
        let record = record.with_context(|| format!("CSV row {}", i + 1))?;
        let text = record.get(text_col).map(str::to_owned);
        let lab = label_col.and_then(|c| record.get(c)).map(str::to_owned);
        out(text, lab);
    }
    Ok(())
}

/// A name as a quoted SQL identifier (`schema.table` quoted per part,
/// unless the user quoted it already).
fn quote_name(name: &str) -> Result<String> {
    if name.trim().is_empty() {
        bail!("an empty table or column name");
    }
    if name.starts_with('"') {
        return Ok(name.to_string());
    }
    Ok(name
        .split('.')
        .map(|p| format!("\"{}\"", p.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join("."))
}

fn read_table(
    dsn: &str,
    table: &str,
    column: &str,
    label: Option<&str>,
    out: &mut dyn FnMut(Option<String>, Option<String>),
) -> Result<()> {
    let mut client = postgres::Client::connect(dsn, postgres::NoTls)
        .context("connecting with --dsn (a libpq connection string or postgresql:// URL)")?;
    let mut select = format!("{}::text AS value", quote_name(column)?);
    if let Some(l) = label {
        select.push_str(&format!(", {}::text AS label", quote_name(l)?));
    }
    let copy = format!(
        "COPY (SELECT {select} FROM {}) TO STDOUT (FORMAT csv, HEADER, FORCE_QUOTE *)",
        quote_name(table)?
    );
    let reader = client
        .copy_out(copy.as_str())
        .with_context(|| format!("reading {table}.{column}"))?;
    // FORCE_QUOTE marks every non-NULL value with quotes; an unquoted empty
    // field is NULL. The csv crate drops the quotes, so NULL and '' both
    // read as empty, and both are skipped as empty values.
    read_csv(reader, "value", label.map(|_| "label"), out)
}

/// The path shown for a source in reports.
pub fn describe(source: &Source) -> String {
    match source {
        Source::File { path, field, .. } => format!(
            "{}{}",
            Path::new(path).display(),
            field
                .as_deref()
                .map(|f| format!(" ({f})"))
                .unwrap_or_default()
        ),
        Source::Table { table, column, .. } => format!("{table}.{column}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str, n: usize, seed: u64) -> Vec<String> {
        let mut r = Reservoir::new(n, seed);
        read_file(text.as_bytes(), Format::Lines, None, None, &mut |t, l| {
            r.offer(t, l)
        })
        .unwrap();
        r.finish().items.into_iter().map(|i| i.text).collect()
    }

    #[test]
    fn the_sample_is_seeded_in_order_and_skips_blanks() {
        let text: String = (0..100).map(|i| format!("value {i}\n\n")).collect();
        let a = lines(&text, 10, 7);
        assert_eq!(a.len(), 10);
        assert_eq!(a, lines(&text, 10, 7));
        assert_ne!(a, lines(&text, 10, 8));
        let idx: Vec<usize> = a
            .iter()
            .map(|v| v.trim_start_matches("value ").parse().unwrap())
            .collect();
        assert!(idx.windows(2).all(|w| w[0] < w[1]), "{idx:?}");
        // Fewer values than asked: all of them.
        assert_eq!(lines("a\nb\n", 10, 1), ["a", "b"]);
        // Longer than the limit: counted, not kept.
        let mut r = Reservoir::new(10, 1);
        r.max_bytes = 3;
        for v in ["abc", "abcd", "ab"] {
            r.offer(Some(v.into()), None);
        }
        let s = r.finish();
        assert_eq!(s.items.len(), 2);
        assert_eq!(s.too_long, 1);
    }

    #[test]
    fn every_value_has_a_fair_chance() {
        // 20 values, samples of 5, 2000 seeds: each value kept ~500 times.
        let text: String = (0..20).map(|i| format!("{i}\n")).collect();
        let mut counts = [0usize; 20];
        for seed in 0..2000 {
            for v in lines(&text, 5, seed) {
                counts[v.parse::<usize>().unwrap()] += 1;
            }
        }
        for c in counts {
            assert!((400..600).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn csv_and_jsonl_read_text_and_label() {
        let mut r = Reservoir::new(10, 1);
        let csv = "id,note,kind\n1,fever and cough,resp\n2,\"chest pain, left arm\",cardiac\n";
        read_file(
            csv.as_bytes(),
            Format::Csv,
            Some("note"),
            Some("kind"),
            &mut |t, l| r.offer(t, l),
        )
        .unwrap();
        let s = r.finish();
        assert_eq!(s.items[1].text, "chest pain, left arm");
        assert_eq!(s.items[1].label.as_deref(), Some("cardiac"));

        let mut r = Reservoir::new(10, 1);
        let err = read_file(
            csv.as_bytes(),
            Format::Csv,
            Some("nte"),
            None,
            &mut |t, l| r.offer(t, l),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("no column \"nte\""), "{err:#}");

        let mut r = Reservoir::new(10, 1);
        let jl =
            "{\"t\": \"a b\", \"y\": \"x\"}\n{\"t\": null, \"y\": 2}\n{\"t\": \"c\", \"y\": 1}\n";
        read_file(
            jl.as_bytes(),
            Format::Jsonl,
            Some("t"),
            Some("y"),
            &mut |t, l| r.offer(t, l),
        )
        .unwrap();
        let s = r.finish();
        assert_eq!(s.items.len(), 2);
        assert_eq!(s.skipped, 1);
        assert_eq!(s.items[0].label.as_deref(), Some("x"));
        assert_eq!(s.items[1].label.as_deref(), Some("1"));
    }

    #[test]
    fn names_are_quoted_per_part() {
        assert_eq!(
            quote_name("public.records").unwrap(),
            "\"public\".\"records\""
        );
        assert_eq!(quote_name("a\"b").unwrap(), "\"a\"\"b\"");
        assert!(quote_name(" ").is_err());
    }
}
