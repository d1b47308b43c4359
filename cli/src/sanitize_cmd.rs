//! `dptext sanitize`'s flags, and turning them into a [`sanitize::Job`].

use std::fs;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use dptext_core::mechanisms::MechanismSpec;
use dptext_core::{Engine, RandomMode};

use crate::engine_flags::EngineFlags;
use crate::output::Output;
use crate::progress;
use crate::sanitize::{self, FieldArg, Format};

const AFTER_HELP: &str = "\
Fields (--format jsonl or csv):
  --field NAME                    sanitize NAME with --mechanism and its flags
  --field NAME=MECHANISM          sanitize NAME with its own mechanism, defaults
  --field NAME=MECHANISM:K=V,K=V  ... with its own parameters (as --params keys)
  --field 'NAME=M1:K=V THEN M2:K=V'  a chain: M1's output is M2's input
  Repeat --field for several. A field with its own mechanism takes none of the
  global flags (--eps, --p, --w, --embedding, --params). The first '=' ends
  the name; values are JSON where they parse as JSON, text otherwise.

Fails closed: a field or column that does not exist, a JSON line without a
field, or a value that is not a string stops the run with an error naming the
line, and nothing is written (stdout is spooled, --output is renamed into
place only on success). JSON null passes through as null (nothing to protect).

--cost, by format:
  lines  every output line is a JSON object {\"text\": ..., \"cost\": {...}}
  jsonl  a key \"<field>_cost\" with the cost object is appended to each line
         (null where the field was null)
  csv    a column \"<column>_cost\" with the cost as JSON is appended per field
  An input that already has such a key or column is refused.

Progress bars (total, rate, ETA) go to stderr when it is a terminal; the
one-line summary always does.

Examples:
  dptext sanitize --eps 3 notes.txt
  dptext sanitize --format csv --field patient=deidentify \\
      --field note=santext_plus:eps=3,p=0.2 in.csv -o out.csv
  dptext sanitize --mechanism custext --eps 2 --format jsonl --field text \\
      --field title=deidentify --cost --seed 1 < in.jsonl
  dptext sanitize --format csv --field 'note=deidentify:operators=DATE:shift;ID:redact THEN santext_plus:eps=3' \\
      --recognizers ours.json in.csv -o out.csv";

/// The flags of `dptext sanitize`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct SanitizeArgs {
    /// santext, santext_plus, custext, deidentify or ndd [default: santext].
    #[arg(long)]
    mechanism: Option<String>,
    /// deidentify, ndd: a JSON file of custom recognizers, allow list and
    /// score threshold (docs/detection.md, "Your own recognizers").
    #[arg(long)]
    recognizers: Option<PathBuf>,
    /// Privacy parameter (> 0) of santext, santext_plus and custext.
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
    format: Format,
    /// JSON field or CSV column to sanitize, optionally with its own
    /// mechanism: NAME, NAME=MECHANISM or NAME=MECHANISM:K=V,... (repeat
    /// for several; see below).
    #[arg(long, value_name = "FIELD")]
    field: Vec<FieldArg>,
    /// Report each value's privacy cost (where it goes per format: below).
    #[arg(long)]
    cost: bool,
    /// Write here instead of stdout: a temporary file beside it, renamed
    /// onto it at the end; nothing is left behind on error. A new file is
    /// private (mode 600); a replaced one keeps its mode.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Input file (default: stdin).
    input: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) engine: EngineFlags,
}

/// Runs `dptext sanitize`.
pub fn run(dir: &Path, a: SanitizeArgs) -> Result<()> {
    let field_args = match (a.format, a.field.is_empty()) {
        (Format::Lines, true) => vec![FieldArg {
            name: String::new(),
            own: None,
        }],
        (Format::Lines, false) => {
            bail!("--field applies to --format jsonl and csv; --format lines sanitizes whole lines")
        }
        (f, true) => bail!(
            "--format {} needs --field NAME (the JSON key or CSV column to sanitize)",
            if f == Format::Csv { "csv" } else { "jsonl" }
        ),
        (_, false) => a.field.clone(),
    };
    let global_flags_given = a.mechanism.is_some()
        || a.eps.is_some()
        || a.p.is_some()
        || a.w.is_some()
        || a.embedding.is_some()
        || a.params.is_some();
    let fields = sanitize::resolve(&field_args, || global_spec(&a), global_flags_given)?;
    let mode = random_mode(&a)?;
    let builds = progress::Builds::default();
    let engine = Engine::new(a.engine.config(dir))
        .with_build_progress(builds.hook("building the CusText mapping"));
    if let Some(path) = &a.recognizers {
        engine.set_recognizers(crate::eval::read_recognizers(path)?);
    }
    let mut targets = Vec::with_capacity(fields.len());
    for f in fields {
        let mechanism = engine.mechanism(&f.spec).with_context(|| {
            if f.name.is_empty() {
                format!("building {}", f.spec.name())
            } else {
                format!("building {} for {:?}", f.spec.name(), f.name)
            }
        })?;
        targets.push(sanitize::Target {
            name: f.name,
            mechanism,
        });
    }
    let (input, size): (Box<dyn BufRead>, Option<u64>) = match &a.input {
        Some(p) => {
            let f = fs::File::open(p).with_context(|| format!("opening {}", p.display()))?;
            let size = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
            (Box::new(BufReader::new(f)), size)
        }
        None => (Box::new(BufReader::new(io::stdin())), None),
    };
    let bar = progress::bytes(size, "sanitizing");
    let job = sanitize::Job {
        engine: &engine,
        targets,
        mode,
        format: a.format,
        with_cost: a.cost,
    };
    let mut out = Output::open(a.output.as_deref())?;
    sanitize::run(&job, input, out.writer(), &bar)?;
    out.commit()
}

/// The spec of `--mechanism` and its flags.
fn global_spec(a: &SanitizeArgs) -> Result<MechanismSpec> {
    // JSON cannot carry NaN or infinities, so check the numbers before
    // they become parameters.
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
            bail!("--params must be a JSON object");
        };
        for (k, v) in extra {
            params[k] = v.clone();
        }
    }
    let mechanism = a.mechanism.as_deref().unwrap_or("santext");
    sanitize::parse_spec(mechanism, &params, |param| match param {
        "eps" => "--eps (e.g. --eps 3)".to_string(),
        "p" | "w" | "embedding" => format!("--{param}"),
        _ => format!("--params '{{\"{param}\": ...}}'"),
    })
}

/// Seeded, keyed or fresh randomness from the flags.
fn random_mode(a: &SanitizeArgs) -> Result<RandomMode> {
    let key = match &a.key_env {
        Some(var) => {
            let k = std::env::var(var).with_context(|| format!("${var} is not set"))?;
            if k.is_empty() {
                bail!("${var} is empty: refusing to fall back to unkeyed output");
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
    Ok(RandomMode::from_settings(
        a.seed,
        key.as_deref().map(str::as_bytes),
    )?)
}
