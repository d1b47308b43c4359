//! `dptext eval`: what each mechanism does to your data, measured on one
//! seeded sample (docs/choosing-epsilon.md).
//!
//! For every mechanism and parameter set asked:
//! - privacy side: the share of words left unchanged (the papers' N_x), the
//!   share of detected PII words that survive verbatim (per label), the
//!   stated guarantee per token and its worst case per value, and the
//!   CusText paper's Query Attack (the words an attacker recovers by asking
//!   for the same value N times, with fresh randomness and with a key);
//! - utility side: the sentence encoder's cosine similarity of each
//!   sanitized value to its original and, with `--label`, the papers'
//!   protocol: a linear classifier trained on sanitized values and tested
//!   on original ones, against the same classifier trained on originals.
//!
//! Output: a table on stdout and, with `--out DIR`, `results.csv` and PNG
//! plots.

mod classify;

mod measure;
mod plot;
mod render;
mod tokens;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use dptext_core::detect::Label;
use dptext_core::encoder::{cosine, SentenceEncoder};
use dptext_core::mechanisms::{Mechanism, MechanismSpec};
use dptext_core::{Engine, RandomMode};

use crate::engine_flags::EngineFlags;
use crate::progress;
use crate::sanitize::Format;

const AFTER_HELP: &str = "\
Mechanisms (--mechanism, repeat or separate names with commas):
  santext, santext_plus, custext    run once per --eps value
  deidentify, ndd                   run once (no eps)
  NAME:K=V,K=V                      with parameters, e.g. custext:k=50,mapping=conservative
                                    (an eps=... here fixes eps for that entry)

What is measured (docs/choosing-epsilon.md):
  unchanged    share of the original's words left as they were (N_x)
  pii kept     share of detected PII words found verbatim in the output
  eps/token    the stated guarantee; worst/value: its worst case for one value (median)
  similarity   mean cosine of sentence-encoder vectors, sanitized vs original
  clf          --label: accuracy on original test values of a linear classifier
               trained on sanitized values (and, in the header, trained on originals)
  QA fresh/key Query Attack: words recovered by a majority vote over --queries
               outputs of one value, with fresh randomness and with a key

Examples:
  dptext eval --format csv --field note --label complaint notes.csv --out report/
  dptext eval --mechanism custext:k=50 --eps 1,5,10 --sample 300 notes.txt
  dptext eval --dsn 'host=/tmp dbname=clinic' --table public.records --column note \\
      --mechanism santext,custext --vocabulary notes --out report/";

/// The flags of `dptext eval`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct EvalArgs {
    /// Input file (lines, JSON lines or CSV); or --table with --dsn.
    input: Option<PathBuf>,
    /// Input format.
    #[arg(long, value_enum, default_value = "lines")]
    format: Format,
    /// JSON key or CSV column of the text (jsonl and csv).
    #[arg(long)]
    field: Option<String>,
    /// Read this table (`schema.table`) instead of a file.
    #[arg(long, requires_all = ["column", "dsn"], conflicts_with = "input")]
    table: Option<String>,
    /// The table's text column.
    #[arg(long, requires = "table")]
    column: Option<String>,
    /// Connection string for --table (libpq key=value or postgresql:// URL).
    #[arg(long)]
    dsn: Option<String>,
    /// A column (CSV, table) or key (JSON lines) holding each value's class:
    /// adds the linear-classifier protocol.
    #[arg(long)]
    label: Option<String>,
    /// Values sampled from the input (seeded reservoir sample).
    #[arg(long, default_value_t = 200)]
    sample: usize,
    /// Seed of the sample, the mechanisms' randomness and the classifier's split.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Mechanisms to measure (see below) [default: santext,santext_plus,custext,deidentify].
    #[arg(long = "mechanism")]
    mechanisms: Vec<String>,
    /// eps values for the mechanisms that take one.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,5,8")]
    eps: Vec<f64>,
    /// Also measure the word mechanisms with this released vocabulary
    /// (`dptext vocab build`), at the same eps values.
    #[arg(long)]
    vocabulary: Vec<String>,
    /// Query Attack: outputs asked for per value (0: no attack).
    #[arg(long, default_value_t = 10)]
    queries: usize,
    /// Query Attack: values of the sample attacked.
    #[arg(long, default_value_t = 20)]
    attack_values: usize,
    /// Single words whose probability of staying unchanged (p_0) to
    /// estimate per word mechanism, as the CusText paper's Table 8
    /// (e.g. happy,car,she,mary).
    #[arg(long, value_delimiter = ',')]
    p0_words: Vec<String>,
    /// Draws per word for --p0-words.
    #[arg(long, default_value_t = 2000)]
    p0_draws: usize,
    /// Write results.csv and the PNG plots here (created if missing).
    #[arg(long)]
    out: Option<PathBuf>,
    /// deidentify, ndd: a JSON file of custom recognizers.
    #[arg(long)]
    recognizers: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) engine: EngineFlags,
}

/// One mechanism with one parameter set.
#[derive(Debug, Clone)]
pub struct Config {
    /// The plot line it belongs to (mechanism, fixed parameters, vocabulary).
    pub series: String,
    /// Its point's label on that line (`eps=3`, or empty).
    pub point: String,
    /// What runs.
    pub spec: MechanismSpec,
    /// eps, for mechanisms that take one.
    pub eps: Option<f64>,
}

/// What was measured for one [`Config`].
#[derive(Debug, Clone)]
pub struct Row {
    /// The configuration.
    pub config: Config,
    /// The stated per-token guarantee, in words.
    pub guarantee: String,
    /// Median and largest worst-case eps of one value.
    pub worst: (f64, f64),
    /// Words in the originals, and of those left unchanged.
    pub words: (usize, usize),
    /// Detected PII words, and of those found verbatim, per label.
    pub pii: BTreeMap<Label, (usize, usize)>,
    /// Mean and 10th percentile of the cosine similarity.
    pub similarity: (f64, f64),
    /// Accuracy on original test values of the classifier trained on
    /// sanitized training values.
    pub classifier: Option<f64>,
    /// Query Attack: share of words recovered with fresh randomness, with a key.
    pub attack: Option<(f64, f64)>,
    /// Seconds spent on this configuration.
    pub seconds: f64,
}

impl Row {
    /// Share of words unchanged.
    pub fn unchanged(&self) -> f64 {
        ratio(self.words.1, self.words.0)
    }

    /// Share of PII words kept, all labels together.
    pub fn pii_kept(&self) -> f64 {
        let (n, k) = self
            .pii
            .values()
            .fold((0, 0), |(n, k), (a, b)| (n + a, k + b));
        ratio(k, n)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        f64::NAN
    } else {
        a as f64 / b as f64
    }
}

/// Runs `dptext eval`.
pub fn run(dir: &Path, a: EvalArgs) -> Result<()> {
    let source = crate::source::Source::from_flags(
        a.input.as_deref(),
        a.format,
        a.field.as_deref(),
        a.table.as_deref(),
        a.column.as_deref(),
        a.dsn.as_deref(),
    )?;
    for &e in &a.eps {
        dptext_core::mechanisms::check_eps(e).context("--eps")?;
    }
    let configs = configs(&a)?;

    let started = Instant::now();
    let config = a.engine.config(dir);
    // Every sampled value goes through detection, whose limit is the
    // smaller one.
    let limit = config.max_detect_bytes.min(config.max_input_bytes);
    let sample = crate::source::sample(&source, a.label.as_deref(), a.sample, a.seed, limit)?;
    if sample.items.is_empty() {
        bail!(
            "{} has no non-empty value to measure",
            crate::source::describe(&source)
        );
    }
    eprintln!(
        "sampled {} of {} values from {} (seed {}; {} empty or NULL skipped)",
        sample.items.len(),
        sample.read,
        crate::source::describe(&source),
        a.seed,
        sample.skipped
    );
    if sample.too_long > 0 {
        eprintln!(
            "warning: {} values longer than {limit} bytes were left out of the sample (--max-detect-bytes raises the limit)",
            sample.too_long
        );
    }

    let builds = progress::Builds::default();
    let engine =
        Engine::new(config.clone()).with_build_progress(builds.hook("building a CusText mapping"));
    if let Some(path) = &a.recognizers {
        engine.set_recognizers(crate::eval::read_recognizers(path)?);
    }
    let encoder = SentenceEncoder::open(&config).context("opening the sentence encoder")?;

    let texts: Vec<&str> = sample.items.iter().map(|i| i.text.as_str()).collect();
    let bar = progress::items(texts.len() as u64, "encoding originals");
    let originals = embed(&encoder, &texts, &bar)?;
    bar.finish_and_clear();

    let bar = progress::items(texts.len() as u64, "detecting PII");
    let mut spans = Vec::with_capacity(texts.len());
    for t in &texts {
        spans.push(
            engine
                .detect(t)
                .context("detecting PII in a sampled value")?,
        );
        bar.inc(1);
    }
    bar.finish_and_clear();

    let labels: Option<Vec<&str>> = a.label.as_ref().map(|_| {
        sample
            .items
            .iter()
            .map(|i| i.label.as_deref().unwrap_or(""))
            .collect()
    });
    let study = Study {
        engine: &engine,
        encoder: &encoder,
        texts: &texts,
        originals: &originals,
        spans: &spans,
        labels: labels.as_deref(),
        seed: a.seed,
        queries: a.queries,
        attack_values: a.attack_values.min(texts.len()),
    };
    let baseline = study.baseline();
    let mut rows = Vec::with_capacity(configs.len());
    for (i, c) in configs.iter().enumerate() {
        let row = study
            .measure(c, i + 1, configs.len())
            .with_context(|| format!("measuring {} {}", c.series, c.point))?;
        rows.push(row);
    }
    let header = render::Header {
        source: crate::source::describe(&source),
        values: texts.len(),
        read: sample.read,
        seed: a.seed,
        queries: a.queries,
        attack_values: study.attack_values,
        baseline,
        seconds: started.elapsed().as_secs_f64(),
    };
    let mut stdout = std::io::stdout().lock();
    render::table(&mut stdout, &header, &rows)?;

    let p0 = if a.p0_words.is_empty() {
        Vec::new()
    } else {
        let p0 = tokens::p0(&engine, &configs, &a.p0_words, a.p0_draws, a.seed)?;
        render::p0_table(&mut stdout, &p0, a.p0_draws)?;
        p0
    };

    if let Some(out) = &a.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let csv = out.join("results.csv");
        render::csv(&csv, &header, &rows)?;
        let mut written = vec![csv];
        if !p0.is_empty() {
            let path = out.join("p0.csv");
            render::p0_csv(&path, &p0)?;
            written.push(path);
        }
        written.extend(render::plots(out, &rows, baseline)?);
        for w in written {
            eprintln!("wrote {}", w.display());
        }
    }
    Ok(())
}

/// Embeds `texts` in chunks, advancing `bar`.
fn embed(
    encoder: &SentenceEncoder,
    texts: &[&str],
    bar: &indicatif::ProgressBar,
) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(64) {
        out.extend(encoder.embed(chunk)?);
        bar.inc(chunk.len() as u64);
    }
    Ok(out)
}

/// The mechanisms and parameter sets asked for, in order.
fn configs(a: &EvalArgs) -> Result<Vec<Config>> {
    let default = ["santext,santext_plus,custext,deidentify".to_string()];
    let entries: Vec<&String> = if a.mechanisms.is_empty() {
        default.iter().collect()
    } else {
        a.mechanisms.iter().collect()
    };
    let mut out = Vec::new();
    for entry in entries {
        // Commas separate names, unless the entry has parameters.
        let parts: Vec<&str> = if entry.contains(':') {
            vec![entry.as_str()]
        } else {
            entry
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect()
        };
        for part in parts {
            out.extend(expand(part, &a.eps)?);
        }
    }
    let mut with_vocab = Vec::new();
    for v in &a.vocabulary {
        for c in &out {
            if let Ok(spec) = c.spec.clone().with_vocabulary(Some(v.clone())) {
                with_vocab.push(Config {
                    series: format!("{} vocab={v}", c.series),
                    point: c.point.clone(),
                    spec,
                    eps: c.eps,
                });
            }
        }
        if with_vocab.is_empty() {
            bail!("--vocabulary {v}: none of the mechanisms asked takes a vocabulary (santext, santext_plus, custext do)");
        }
    }
    out.extend(with_vocab);
    if out.is_empty() {
        bail!("no mechanism to measure");
    }
    Ok(out)
}

/// One `--mechanism` entry: one config, or one per eps when it needs eps.
fn expand(entry: &str, eps: &[f64]) -> Result<Vec<Config>> {
    let arg: crate::sanitize::FieldArg = format!("m={entry}")
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--mechanism {entry:?}: {e}"))?;
    let Some((name, params)) = arg.own else {
        bail!("--mechanism {entry:?}: no mechanism name");
    };
    let fixed: Vec<String> = params
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| k.as_str() != "eps")
                .map(|(k, v)| {
                    format!(
                        "{k}={}",
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let series = if fixed.is_empty() {
        name.clone()
    } else {
        format!("{name} {}", fixed.join(","))
    };
    let needs_eps = params.get("eps").is_none()
        && matches!(
            MechanismSpec::parse(&name, &params),
            Err(dptext_core::Error::InvalidParameter { ref reason, .. }) if reason.starts_with("missing field `eps`")
        );
    if !needs_eps {
        let spec = crate::sanitize::parse_spec(&name, &params, |p| {
            format!("{p}=... in --mechanism {name}:{p}=...")
        })
        .with_context(|| format!("--mechanism {entry}"))?;
        let eps = params.get("eps").and_then(serde_json::Value::as_f64);
        return Ok(vec![Config {
            series,
            point: eps.map(|e| format!("eps={e}")).unwrap_or_default(),
            spec,
            eps,
        }]);
    }
    let mut out = Vec::with_capacity(eps.len());
    for &e in eps {
        let mut p = params.clone();
        p["eps"] = e.into();
        let spec = MechanismSpec::parse(&name, &p)
            .with_context(|| format!("--mechanism {entry} at eps {e}"))?;
        out.push(Config {
            series: series.clone(),
            point: format!("eps={e}"),
            spec,
            eps: Some(e),
        });
    }
    Ok(out)
}

/// Everything measured once and shared by every configuration.
struct Study<'a> {
    engine: &'a Engine,
    encoder: &'a SentenceEncoder,
    texts: &'a [&'a str],
    originals: &'a [Vec<f32>],
    spans: &'a [Vec<dptext_core::detect::Span>],
    labels: Option<&'a [&'a str]>,
    seed: u64,
    queries: usize,
    attack_values: usize,
}

/// The key of the keyed Query Attack: fixed per seed, so that runs repeat.
/// The attacker never uses it; what matters is that one key answers every
/// query, as in a sanitized view or the proxy.
fn attack_key(seed: u64) -> Result<RandomMode> {
    Ok(RandomMode::from_settings(
        None,
        Some(format!("dptext eval query-attack key {seed}").as_bytes()),
    )?)
}

impl Study<'_> {
    /// The classifier trained and tested on originals (`None` without labels).
    fn baseline(&self) -> Option<f64> {
        self.classifier(self.originals)
    }

    fn measure(&self, c: &Config, n: usize, of: usize) -> Result<Row> {
        let started = Instant::now();
        let mechanism = self.engine.mechanism(&c.spec)?;
        let m = mechanism.as_ref();
        let attack_runs = if self.queries > 0 {
            2 * self.attack_values * self.queries
        } else {
            0
        };
        let bar = progress::items(
            (self.texts.len() + attack_runs) as u64,
            &format!("[{n}/{of}] {} {}", c.series, c.point),
        );
        let mode = RandomMode::Seeded(self.seed);
        let mut outputs = Vec::with_capacity(self.texts.len());
        let mut worst = Vec::with_capacity(self.texts.len());
        let mut guarantee = String::new();
        for (i, t) in self.texts.iter().enumerate() {
            let out = self
                .engine
                .run(m, t, &mode, &[b"dptext eval", &(i as u64).to_le_bytes()])?;
            if guarantee.is_empty() {
                guarantee = render::guarantee(&out.cost.guarantee);
            }
            worst.push(out.cost.worst_case_eps);
            outputs.push(out.text);
            bar.inc(1);
        }
        let mut words = (0, 0);
        let mut pii: BTreeMap<Label, (usize, usize)> = BTreeMap::new();
        for ((t, o), s) in self.texts.iter().zip(&outputs).zip(self.spans) {
            let (ow, sw) = (measure::words(t), measure::words(o));
            words.0 += ow.len();
            words.1 += measure::unchanged(&ow, &sw);
            for (label, (k, kept)) in measure::pii_kept(&measure::pii_words(t, s), &sw) {
                let e = pii.entry(label).or_default();
                e.0 += k;
                e.1 += kept;
            }
        }
        let refs: Vec<&str> = outputs.iter().map(String::as_str).collect();
        let vectors = self.encoder.embed(&refs)?;
        let mut sims: Vec<f64> = vectors
            .iter()
            .zip(self.originals)
            .map(|(a, b)| f64::from(cosine(a, b)))
            .collect();
        sims.sort_by(f64::total_cmp);
        let mean = sims.iter().sum::<f64>() / sims.len().max(1) as f64;
        let p10 = sims.get(sims.len() / 10).copied().unwrap_or(f64::NAN);
        let classifier = self.classifier(&vectors);
        let attack = if self.queries > 0 {
            Some(self.attack(m, &bar)?)
        } else {
            None
        };
        bar.finish_and_clear();
        worst.sort_by(f64::total_cmp);
        Ok(Row {
            config: c.clone(),
            guarantee,
            worst: (
                worst.get(worst.len() / 2).copied().unwrap_or(f64::NAN),
                worst.last().copied().unwrap_or(f64::NAN),
            ),
            words,
            pii,
            similarity: (mean, p10),
            classifier,
            attack,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// Trained on `trained_on`'s training values (sanitized, or the
    /// originals for the baseline), tested on original test values.
    fn classifier(&self, trained_on: &[Vec<f32>]) -> Option<f64> {
        let labels = self.labels?;
        let (train, test) = classify::split(self.texts.len(), self.seed);
        let x: Vec<&[f32]> = train.iter().map(|&i| trained_on[i].as_slice()).collect();
        let y: Vec<&str> = train.iter().map(|&i| labels[i]).collect();
        let model = classify::Linear::train(&x, &y)?;
        let tx: Vec<&[f32]> = test.iter().map(|&i| self.originals[i].as_slice()).collect();
        let ty: Vec<&str> = test.iter().map(|&i| labels[i]).collect();
        Some(model.accuracy(&tx, &ty))
    }

    /// The Query Attack on the first `attack_values` values: `queries`
    /// outputs each with fresh randomness (a seeded stream per query,
    /// distributed as OS randomness is, but repeatable), then the same with
    /// one key. Returns the shares of words recovered.
    fn attack(&self, m: &dyn Mechanism, bar: &indicatif::ProgressBar) -> Result<(f64, f64)> {
        let fresh = RandomMode::Seeded(self.seed);
        let keyed = attack_key(self.seed)?;
        let (mut total, mut got_fresh, mut got_keyed) = (0, 0, 0);
        for (i, t) in self.texts.iter().take(self.attack_values).enumerate() {
            let orig = measure::words(t);
            total += orig.len();
            for (mode, got) in [(&fresh, &mut got_fresh), (&keyed, &mut got_keyed)] {
                let mut outs = Vec::with_capacity(self.queries);
                for q in 0..self.queries {
                    let q_bytes = (q as u64).to_le_bytes();
                    let i_bytes = (i as u64).to_le_bytes();
                    // Fresh: every query its own stream. Keyed: the engine's
                    // own stream for the value, the same for every query.
                    let ctx: Vec<&[u8]> = if matches!(mode, RandomMode::Keyed(_)) {
                        Vec::new()
                    } else {
                        vec![b"dptext eval query", &i_bytes, &q_bytes]
                    };
                    outs.push(self.engine.run(m, t, mode, &ctx)?.text);
                    bar.inc(1);
                }
                let outs: Vec<Vec<&str>> = outs.iter().map(|o| measure::words(o)).collect();
                *got += measure::query_attack(&orig, &outs);
            }
        }
        Ok((ratio(got_fresh, total), ratio(got_keyed, total)))
    }
}
