//! `dptext vocab`: build a vocabulary from a file or a table with
//! differential privacy (set union, docs/vocabulary.md), list the built ones, show one.

use std::io;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use dptext_core::mechanisms::EmbeddingChoice;
use dptext_core::vocab::dpsu::DEFAULT_MAX_WORDS_PER_VALUE;
use dptext_core::vocab::{Counter, Noise, ReleaseParams, VocabularyAsset};
use dptext_core::{Engine, RandomMode};

use crate::engine_flags::EngineFlags;
use crate::progress;

/// What `dptext vocab` does.
#[derive(clap::Subcommand)]
pub enum VocabAction {
    /// Release the words of a file's values with (eps, delta)-DP and save
    /// them as the vocabulary NAME (`vocabulary=NAME` in mechanism parameters).
    Build(Box<BuildArgs>),
    /// List the vocabularies in the assets directory.
    List,
    /// Show how a vocabulary was released, and its first words.
    Show {
        /// The vocabulary's name.
        name: String,
        /// How many words to print (in release order, most frequent first).
        #[arg(long, default_value_t = 20)]
        words: usize,
    },
}

/// The flags of `dptext vocab build`.
#[derive(clap::Args)]
pub struct BuildArgs {
    /// Input file: one value per line, per JSON line (`--field`) or per CSV row (`--field`).
    #[arg(long, required_unless_present = "table", conflicts_with = "table")]
    input: Option<PathBuf>,
    /// Read this table (`schema.table`) instead of a file, over --dsn.
    #[arg(long, requires_all = ["column", "dsn"])]
    table: Option<String>,
    /// The table's text column.
    #[arg(long, requires = "table")]
    column: Option<String>,
    /// Connection string for --table (libpq key=value or postgresql:// URL).
    #[arg(long, requires = "table")]
    dsn: Option<String>,
    /// Input format.
    #[arg(long, value_enum, default_value = "lines")]
    format: crate::sanitize::Format,
    /// JSON key or CSV column holding the text (jsonl and csv).
    #[arg(long)]
    field: Option<String>,
    /// Privacy parameter of the release (> 0), per value.
    #[arg(long)]
    eps: f64,
    /// delta of the release, in (0, 0.5): below 1 / (number of values).
    #[arg(long)]
    delta: f64,
    /// Distinct words one value contributes at most.
    #[arg(long, default_value_t = DEFAULT_MAX_WORDS_PER_VALUE)]
    max_words_per_value: usize,
    /// laplace or gaussian.
    #[arg(long, default_value = "laplace")]
    noise: String,
    /// The vocabulary's name: letters, digits, '_' and '-'.
    #[arg(long)]
    name: String,
    /// Replace a vocabulary of that name (mechanisms using it then draw differently).
    #[arg(long)]
    replace: bool,
    /// Reproducible noise from this seed (tests and audits: whoever knows
    /// the seed can recompute the noise).
    #[arg(long)]
    seed: Option<u64>,
    /// Engine settings; `--glove-words`: the GloVe words the vocabulary
    /// is drawn from (use the same when sanitizing with it).
    #[command(flatten)]
    pub(crate) engine: EngineFlags,
}

/// Runs `dptext vocab`.
pub fn run(dir: &Path, action: VocabAction) -> Result<()> {
    match action {
        VocabAction::Build(a) => build(dir, &a),
        VocabAction::List => list(dir),
        VocabAction::Show { name, words } => show(dir, &name, words),
    }
}

fn build(dir: &Path, a: &BuildArgs) -> Result<()> {
    let params = ReleaseParams {
        eps: a.eps,
        delta: a.delta,
        max_words_per_value: a.max_words_per_value,
        noise: a.noise.parse::<Noise>()?,
    };
    params.validate()?;
    dptext_core::vocab::check_name(&a.name)?;
    let path = VocabularyAsset::path(dir, &a.name)?;
    if path.exists() && !a.replace {
        bail!(
            "vocabulary {} already exists at {}: choose another --name, or pass --replace",
            a.name,
            path.display()
        );
    }
    let engine = Engine::new(a.engine.config(dir));
    let glove = engine.vocabulary(EmbeddingChoice::Glove)?;
    let mut counter = Counter::new(glove.embeddings(), params)?;

    let source = crate::source::Source::from_flags(
        a.input.as_deref(),
        a.format,
        a.field.as_deref(),
        a.table.as_deref(),
        a.column.as_deref(),
        a.dsn.as_deref(),
    )?;
    let bar = progress::count("counting words", "values");
    crate::source::for_each(&source, None, |text, _| {
        if let Some(t) = text {
            counter.add(&t);
        }
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let mode = match a.seed {
        Some(s) => RandomMode::Seeded(s),
        None => RandomMode::Os,
    };
    let release = counter.finish(&mode)?;
    let (values, truncated, candidates) = (release.values, release.truncated, release.candidates);
    let (threshold, scale) = (release.threshold, release.scale);
    let described = match &source {
        crate::source::Source::File { path, field, .. } => format!(
            "{}{}",
            path.display(),
            field
                .as_deref()
                .map(|f| format!(" field {f}"))
                .unwrap_or_default()
        ),
        crate::source::Source::Table { table, column, .. } => format!("{table}.{column}"),
    };
    let asset = VocabularyAsset::new(&a.name, &described, &params, release, glove.embeddings())?;
    let written = asset.save(dir, a.replace)?;
    outln!(
        "vocabulary {}: {} words released of {candidates} distinct embedding words in {values} values ({truncated} cut to {} words)",
        asset.name,
        asset.words.len(),
        params.max_words_per_value
    );
    outln!(
        "release: eps {} delta {} per value, {} noise (scale {scale:.3}), threshold {threshold:.3}",
        params.eps,
        params.delta,
        params.noise.name()
    );
    outln!("written to {}", written.display());
    outln!(
        "(the counts of values and words above are exact, for you; the file holds only the released words)"
    );
    if asset.words.is_empty() {
        eprintln!("warning: no word passed the threshold: use more values, a larger eps or delta, or a smaller --max-words-per-value");
    }
    Ok(())
}

fn list(dir: &Path) -> Result<()> {
    let names = VocabularyAsset::list(dir)?;
    if names.is_empty() {
        outln!("no vocabularies in {}", dir.display());
    }
    for name in names {
        match VocabularyAsset::load(dir, &name) {
            Ok(v) => outln!(
                "{name}\t{} words\teps {} delta {}\t{}\t{}",
                v.words.len(),
                v.eps,
                v.delta,
                v.created,
                v.source
            ),
            Err(e) => outln!("{name}\tunreadable: {e}"),
        }
    }
    Ok(())
}

fn show(dir: &Path, name: &str, words: usize) -> Result<()> {
    let v = VocabularyAsset::load(dir, name)?;
    let mut out = io::stdout().lock();
    use std::io::Write;
    writeln!(out, "name: {}", v.name)?;
    writeln!(out, "source: {}", v.source)?;
    writeln!(out, "created: {}", v.created)?;
    writeln!(
        out,
        "release: eps {} delta {} per value, {} noise, threshold {:.3}, at most {} words per value",
        v.eps, v.delta, v.noise, v.threshold, v.max_words_per_value
    )?;
    writeln!(
        out,
        "embedding: {} ({} rows)",
        v.embedding, v.embedding_rows
    )?;
    writeln!(out, "digest: {}", v.digest)?;
    writeln!(out, "words: {}", v.words.len())?;
    let shown: Vec<&str> = v.words.iter().take(words).map(String::as_str).collect();
    writeln!(out, "first words: {}", shown.join(" "))?;
    Ok(())
}
