//! The engine's settings ([`EngineConfig`]) and their defaults.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::runtime::Device;

/// Default number of GloVe words loaded (the most frequent ones).
pub const DEFAULT_GLOVE_WORDS: usize = 50_000;
/// Default byte budget of each sampler's per-token cache.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;
/// Default largest input accepted, in bytes.
pub const DEFAULT_MAX_INPUT_BYTES: usize = 64 << 20;
/// Default largest input `detect` accepts, in bytes (the model reads every
/// token, so detection is far costlier per byte than the word mechanisms).
pub const DEFAULT_MAX_DETECT_BYTES: usize = 1 << 20;
/// Default ONNX Runtime threads: one, the right number inside a
/// PostgreSQL backend or a proxy worker, where processes or workers
/// already share the cores (the CLI uses every core).
pub const DEFAULT_MODEL_THREADS: usize = 1;
/// Default of [`EngineConfig::build_mappings`]: off, because a build takes
/// minutes of every core and a server should not start one inside a
/// query; the CLI, where mappings are built, turns it on.
pub const DEFAULT_BUILD_MAPPINGS: bool = false;
/// Default device models run on.
pub const DEFAULT_DEVICE: Device = Device::Cpu;
/// Default rows per masked-LM call.
pub const DEFAULT_MLM_BATCH: usize = 64;
/// Default rows (windows, lines) per detection-model call.
pub const DEFAULT_DETECT_BATCH: usize = crate::detect::model::DEFAULT_BATCH;

/// Largest released vocabulary whose CusText mapping any engine builds in
/// memory, without a disk cache, whatever [`EngineConfig::build_mappings`]
/// says: `n^2` distances, a few seconds on one core at this size, and a
/// vocabulary built in SQL has no CLI step that could build them.
pub const SMALL_VOCABULARY_WORDS: usize = 20_000;

/// Settings of an [`Engine`]: the one settings type every front end fills
/// (the extension from its `dptext.*` settings, the proxy from its
/// `[engine]` table, the CLI from its engine flags). Every default is one
/// of this module's `DEFAULT_*` constants, and the front ends take their
/// own defaults from those constants.
///
/// As a settings table (TOML, JSON) every key is optional and an unknown
/// key is an error:
///
/// ```
/// use dptext_core::EngineConfig;
/// let c: EngineConfig = serde_json::from_value(serde_json::json!({"glove_words": 20000})).unwrap();
/// assert_eq!(c, EngineConfig { glove_words: 20_000, ..EngineConfig::default() });
/// let e = serde_json::from_value::<EngineConfig>(serde_json::json!({"glove_word": 1})).unwrap_err();
/// assert!(e.to_string().contains("unknown field `glove_word`"), "{e}");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// The assets directory (default: `$DPTEXT_ASSETS`, else the user's
    /// cache directory, `~/.cache/dptext`: [`crate::assets::resolve_dir`]).
    pub assets_dir: PathBuf,
    /// How many of the most frequent GloVe words form the vocabulary
    /// (default [`DEFAULT_GLOVE_WORDS`], 50,000).
    pub glove_words: usize,
    /// Byte budget of each sampler's per-token table cache (default
    /// [`DEFAULT_CACHE_BYTES`], 64 MiB).
    pub cache_bytes: u64,
    /// Largest input accepted, in bytes (default
    /// [`DEFAULT_MAX_INPUT_BYTES`], 64 MiB).
    pub max_input_bytes: usize,
    /// ONNX Runtime threads (default [`DEFAULT_MODEL_THREADS`], 1): the
    /// detection model's intra-op threads; on the CPU the masked LM keeps
    /// one single-threaded session per thread, up to
    /// [`crate::mlm::MAX_SESSIONS`].
    pub model_threads: usize,
    /// Largest input that detection or a model reads whole, in bytes
    /// (default [`DEFAULT_MAX_DETECT_BYTES`], 1 MiB).
    pub max_detect_bytes: usize,
    /// Whether a CusText mapping missing from the disk cache may be built
    /// in this process (minutes of all cores); when false, a missing
    /// mapping is an error naming the CLI command that builds it (default
    /// [`DEFAULT_BUILD_MAPPINGS`], false).
    pub build_mappings: bool,
    /// The masked LM's directory (default `None`: `<assets>/mlm`, the
    /// project's model).
    pub mlm_model: Option<PathBuf>,
    /// Where models run, `"cpu"` or `"cuda"` (default [`DEFAULT_DEVICE`],
    /// the CPU; CUDA falls back to the CPU with one warning).
    pub device: Device,
    /// Rows per masked-LM call (default [`DEFAULT_MLM_BATCH`], 64).
    pub mlm_batch: usize,
    /// Rows per detection-model call: windows and lines of one value, or
    /// of several with [`Engine::detect_many`] and [`Engine::run_many`];
    /// 1: unbatched (default [`DEFAULT_DETECT_BATCH`], 4).
    pub detect_batch: usize,
}

impl EngineConfig {
    /// Defaults with the given assets directory.
    pub fn new(assets_dir: PathBuf) -> Self {
        EngineConfig {
            assets_dir,
            glove_words: DEFAULT_GLOVE_WORDS,
            cache_bytes: DEFAULT_CACHE_BYTES,
            max_input_bytes: DEFAULT_MAX_INPUT_BYTES,
            model_threads: DEFAULT_MODEL_THREADS,
            max_detect_bytes: DEFAULT_MAX_DETECT_BYTES,
            build_mappings: DEFAULT_BUILD_MAPPINGS,
            mlm_model: None,
            device: DEFAULT_DEVICE,
            mlm_batch: DEFAULT_MLM_BATCH,
            detect_batch: DEFAULT_DETECT_BATCH,
        }
    }

    /// Checks the counts and sizes, which must be at least 1; the error
    /// names the setting.
    ///
    /// ```
    /// use dptext_core::EngineConfig;
    /// let c = EngineConfig { mlm_batch: 0, ..EngineConfig::default() };
    /// assert!(c.validate().unwrap_err().to_string().contains("mlm_batch"));
    /// ```
    pub fn validate(&self) -> Result<()> {
        for (name, value) in [
            ("glove_words", self.glove_words as u64),
            ("cache_bytes", self.cache_bytes),
            ("max_input_bytes", self.max_input_bytes as u64),
            ("model_threads", self.model_threads as u64),
            ("max_detect_bytes", self.max_detect_bytes as u64),
            ("mlm_batch", self.mlm_batch as u64),
            ("detect_batch", self.detect_batch as u64),
        ] {
            if value == 0 {
                return Err(Error::invalid(name, "must be at least 1"));
            }
        }
        Ok(())
    }
}

impl Default for EngineConfig {
    /// Defaults with the assets directory of [`crate::assets::resolve_dir`]
    /// (`$DPTEXT_ASSETS`, else the user's cache directory).
    fn default() -> Self {
        EngineConfig::new(crate::assets::resolve_dir(None))
    }
}
