//! The engine flags: core's one settings type, [`EngineConfig`], as the
//! flags of every subcommand that builds an engine (flattened into each),
//! with core's defaults.
//!
//! Two settings differ from core's defaults on purpose, because the CLI is
//! a one-off run on the user's own machine rather than a shared server:
//! models use every core unless `--threads` says otherwise, and a CusText
//! mapping missing from the disk cache is built (the CLI is where mappings
//! are built, `dptext custext-map`).

use std::path::{Path, PathBuf};

use clap::builder::RangedU64ValueParser;
use dptext_core::engine::{self, EngineConfig};
use dptext_core::runtime::Device;

/// The engine's settings as flags (the names are the settings' keys, as
/// in the proxy's `[engine]` table and the extension's `dptext.*`).
#[derive(clap::Args, Debug, Clone, PartialEq)]
#[command(next_help_heading = "Engine settings")]
pub struct EngineFlags {
    /// Number of most frequent GloVe words in the vocabulary (as
    /// dptext.glove_words).
    #[arg(long, default_value_t = engine::DEFAULT_GLOVE_WORDS, value_parser = at_least_one())]
    pub glove_words: usize,
    /// Where models run: cpu or cuda (falls back to the CPU with one
    /// warning; as dptext.device).
    #[arg(long, default_value_t = engine::DEFAULT_DEVICE)]
    pub device: Device,
    /// ONNX Runtime threads [default: all cores]: the detection model's
    /// intra-op threads; the masked LM spreads them over a pool of
    /// single-threaded sessions (up to 8).
    #[arg(long, visible_alias = "model-threads", value_parser = at_least_one())]
    pub threads: Option<usize>,
    /// ndd: directory of the masked LM [default: <assets>/mlm] (as
    /// dptext.mlm_model).
    #[arg(long)]
    pub mlm_model: Option<PathBuf>,
    /// Masked copies per masked-LM call (as dptext.mlm_batch).
    #[arg(long, default_value_t = engine::DEFAULT_MLM_BATCH, value_parser = at_least_one())]
    pub mlm_batch: usize,
    /// Rows (windows, lines, of one value or several) per detection-model
    /// call (1: one a call).
    #[arg(
        long,
        visible_alias = "batch",
        default_value_t = engine::DEFAULT_DETECT_BATCH,
        value_parser = at_least_one()
    )]
    pub detect_batch: usize,
    /// Largest value accepted, in bytes (as dptext.max_input_bytes).
    #[arg(long, default_value_t = engine::DEFAULT_MAX_INPUT_BYTES, value_parser = at_least_one())]
    pub max_input_bytes: usize,
    /// Largest value that detection or a model reads whole, in bytes
    /// (deidentify, ndd; as dptext.max_detect_bytes).
    #[arg(long, default_value_t = engine::DEFAULT_MAX_DETECT_BYTES, value_parser = at_least_one())]
    pub max_detect_bytes: usize,
    /// Byte budget of each sampler's per-token cache.
    #[arg(long, default_value_t = engine::DEFAULT_CACHE_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub cache_bytes: u64,
}

/// A count of at least 1.
fn at_least_one() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::<usize>::new().range(1..)
}

/// Every core of this machine (1 when that cannot be known).
pub fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

impl EngineFlags {
    /// The engine settings these flags give, over the assets in `assets`.
    pub fn config(&self, assets: &Path) -> EngineConfig {
        EngineConfig {
            glove_words: self.glove_words,
            cache_bytes: self.cache_bytes,
            max_input_bytes: self.max_input_bytes,
            model_threads: self.threads.unwrap_or_else(all_cores),
            max_detect_bytes: self.max_detect_bytes,
            // The CLI is where mappings are built: see the module's doc.
            build_mappings: true,
            mlm_model: self.mlm_model.clone(),
            device: self.device,
            mlm_batch: self.mlm_batch,
            detect_batch: self.detect_batch,
            ..EngineConfig::new(assets.to_path_buf())
        }
    }
}

/// What the flags give without any: core's defaults, but for the two the
/// module's doc names.
#[cfg(test)]
pub(crate) fn cli_defaults(dir: &Path) -> EngineConfig {
    EngineConfig {
        model_threads: all_cores(),
        build_mappings: true,
        ..EngineConfig::new(dir.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        engine: EngineFlags,
    }

    fn parse(args: &[&str]) -> Result<EngineFlags, clap::Error> {
        Flags::try_parse_from(std::iter::once("dptext").chain(args.iter().copied()))
            .map(|f| f.engine)
    }

    #[test]
    fn default_flags_give_cores_defaults() {
        let dir = Path::new("/srv/assets");
        assert_eq!(parse(&[]).unwrap().config(dir), cli_defaults(dir));
    }

    #[test]
    fn every_flag_reaches_its_setting() {
        let flags = parse(&[
            "--glove-words=7",
            "--device=cuda",
            "--model-threads=3",
            "--mlm-model=/m",
            "--mlm-batch=5",
            "--batch=2",
            "--max-input-bytes=11",
            "--max-detect-bytes=13",
            "--cache-bytes=17",
        ])
        .unwrap();
        let c = flags.config(Path::new("/a"));
        assert_eq!(
            c,
            EngineConfig {
                glove_words: 7,
                device: Device::Cuda,
                model_threads: 3,
                mlm_model: Some("/m".into()),
                mlm_batch: 5,
                detect_batch: 2,
                max_input_bytes: 11,
                max_detect_bytes: 13,
                cache_bytes: 17,
                build_mappings: true,
                ..EngineConfig::new("/a".into())
            }
        );
    }

    #[test]
    fn zero_counts_and_unknown_devices_are_refused() {
        for flag in [
            "--glove-words=0",
            "--threads=0",
            "--mlm-batch=0",
            "--detect-batch=0",
            "--max-input-bytes=0",
            "--max-detect-bytes=0",
            "--cache-bytes=0",
        ] {
            assert!(parse(&[flag]).is_err(), "{flag}");
        }
        let e = parse(&["--device=tpu"]).unwrap_err().to_string();
        assert!(e.contains("tpu"), "{e}");
    }
}
