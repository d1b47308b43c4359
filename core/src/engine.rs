//! The entry point front ends use: load vocabularies lazily, build
//! mechanisms from validated parameters, and run them with the right
//! random stream.
//!
//! One `Engine` lives per process (per PostgreSQL backend, per proxy, per
//! CLI run); vocabularies are loaded on first use and stay cached.
//!
//! Input limits are decided here, per mechanism, so that every front end
//! and every path enforces the same ones: every input is held to
//! `max_input_bytes`, and whatever runs detection or a model over the
//! whole text (detection, entity replacement, NDD) also to
//! `max_detect_bytes`. Every call runs under the engine's cancellation
//! hook, if it has one ([`crate::cancel`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::assets::{GLOVE_DIR, WORDPIECE_DIR};
use crate::cancel::{CancelCheck, Scope};
use crate::embeddings::{Embeddings, MapFn};
use crate::error::{Error, Result};
use std::collections::HashMap;

use crate::detect::Detector;
use crate::detect::Span;
use crate::mechanisms::cache::MechanismCache;
use crate::mechanisms::custext::{self, Mapping};
use crate::mechanisms::deidentify::Deidentify;
use crate::mechanisms::ndd::NddDistort;
use crate::mechanisms::{
    CusText, EmbeddingChoice, Mechanism, MechanismSpec, SanText, SanTextPlus, Sanitized,
    Vocabulary, Words,
};
use crate::mlm::MaskedLm;
use crate::rng::RandomMode;
use crate::runtime::Device;
use crate::vocab::VocabularyAsset;
use serde::{Deserialize, Serialize};

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

/// Loads vocabularies on demand and runs mechanisms.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    map: Option<MapFn>,
    glove: Mutex<Option<Arc<Vocabulary>>>,
    wordpiece: Mutex<Option<Arc<Vocabulary>>>,
    mappings: Mutex<HashMap<MappingKey, Arc<Mapping>>>,
    /// Released vocabularies by name: registered by the front end (the
    /// extension reads them from its catalog) or read from the assets.
    vocab_assets: Mutex<HashMap<String, Arc<VocabularyAsset>>>,
    /// The GloVe vocabulary restricted to a released one, by (name, digest).
    restricted: Mutex<HashMap<(String, String), Arc<Vocabulary>>>,
    detector: Mutex<Option<Arc<Detector>>>,
    /// The user's recognizers, handed to the detector when it loads.
    custom: Mutex<Arc<crate::detect::custom::Custom>>,
    /// Masked LMs keyed by (model directory, requested device).
    mlms: moka::sync::Cache<(PathBuf, Device), Arc<MaskedLm>>,
    /// Installed around every call; `None`: calls run to the end.
    cancel: Option<Hook>,
    /// Built mechanisms by spec ([`Engine::mechanism`]).
    built: MechanismCache,
    /// Told how a build this engine runs for a caller goes (a CusText
    /// mapping): `f(done, total)`.
    build_progress: Option<ProgressHook>,
}

/// The build-progress callback, with a `Debug` that says only that there
/// is one.
#[derive(Clone)]
struct ProgressHook(BuildProgress);

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

/// A progress callback for long builds: `f(done, total)`, rate-limited by
/// the build ([`crate::progress`]).
pub type BuildProgress = Arc<dyn Fn(usize, usize) + Send + Sync>;

/// The cancellation hook, with a `Debug` that says only whether there is one.
#[derive(Clone)]
struct Hook(CancelCheck);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

/// (embedding set name, K, strategy, metric): the name tells a restricted
/// vocabulary, and its version, from the embedding's own.
type MappingKey = (String, usize, custext::MappingStrategy, custext::Metric);

impl Engine {
    /// An engine with nothing loaded yet.
    pub fn new(config: EngineConfig) -> Self {
        Engine {
            config,
            map: None,
            glove: Mutex::new(None),
            wordpiece: Mutex::new(None),
            mappings: Mutex::new(HashMap::new()),
            vocab_assets: Mutex::new(HashMap::new()),
            restricted: Mutex::new(HashMap::new()),
            detector: Mutex::new(None),
            custom: Mutex::new(Arc::default()),
            mlms: moka::sync::Cache::new(4),
            cancel: None,
            built: MechanismCache::default(),
            build_progress: None,
        }
    }

    /// This engine, telling `f(done, total)` how each long build it runs
    /// goes (a CusText mapping missing from the disk cache: a minute of all
    /// cores for GloVe's 50,000 words), so that a front end can show it.
    pub fn with_build_progress(mut self, f: BuildProgress) -> Self {
        self.build_progress = Some(ProgressHook(f));
        self
    }

    /// This engine, with `hook` asked by every long loop of every call
    /// (on the calling thread only; see [`crate::cancel`]).
    ///
    /// ```
    /// use dptext_core::{cancel::Flag, Engine, EngineConfig};
    /// let flag = Flag::new();
    /// let engine = Engine::new(EngineConfig::new("/nonexistent".into())).with_cancel(flag.hook());
    /// flag.cancel(); // from anywhere: the engine's calls stop at their next check
    /// ```
    pub fn with_cancel(mut self, hook: CancelCheck) -> Self {
        self.cancel = Some(Hook(hook));
        self
    }

    /// Installs the engine's hook for one call (keeps the caller's own
    /// when the engine has none).
    fn scope(&self) -> Option<Scope> {
        self.cancel.as_ref().map(|h| Scope::enter(h.0.clone()))
    }

    /// Runs `f` under the engine's cancellation hook: for front ends that
    /// call core functions directly.
    pub fn cancellable<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let _scope = self.scope();
        crate::cancel::check()?;
        f()
    }

    /// The largest input accepted for a computation that does
    /// (`detection = true`) or does not run detection or a model over the
    /// whole text.
    pub fn limit(&self, detection: bool) -> usize {
        if detection {
            self.config
                .max_input_bytes
                .min(self.config.max_detect_bytes)
        } else {
            self.config.max_input_bytes
        }
    }

    /// `Err(InputTooLarge)` when `text` is over [`Engine::limit`].
    pub fn check_size(&self, text: &str, detection: bool) -> Result<()> {
        let limit = self.limit(detection);
        if text.len() > limit {
            return Err(Error::InputTooLarge {
                size: text.len(),
                limit,
            });
        }
        Ok(())
    }

    /// An engine that memory-maps embedding matrices with `map`, so that
    /// processes share one copy (the extension passes an `mmap`).
    pub fn with_map(config: EngineConfig, map: MapFn) -> Self {
        Engine {
            map: Some(map),
            ..Engine::new(config)
        }
    }

    /// The settings this engine was built with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The vocabulary for `which`, loading it on first use. A failed load is
    /// not cached, so fetching the assets fixes the next call.
    pub fn vocabulary(&self, which: EmbeddingChoice) -> Result<Arc<Vocabulary>> {
        let (slot, dir, limit) = match which {
            EmbeddingChoice::Glove => (&self.glove, GLOVE_DIR, Some(self.config.glove_words)),
            EmbeddingChoice::Wordpiece => (&self.wordpiece, WORDPIECE_DIR, None),
        };
        let mut guard = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(v) = guard.as_ref() {
            return Ok(v.clone());
        }
        let started = std::time::Instant::now();
        let emb = Embeddings::load_with(&self.config.assets_dir.join(dir), limit, self.map)?;
        tracing::info!(
            embedding = emb.name(),
            rows = emb.len(),
            mapped = emb.is_mapped(),
            ms = started.elapsed().as_millis() as u64,
            "vocabulary loaded"
        );
        let v = Arc::new(Vocabulary::new(emb, self.config.cache_bytes));
        *guard = Some(v.clone());
        Ok(v)
    }

    /// Makes the released vocabulary `asset` known by its name (checked
    /// first), replacing one of the same name: for front ends that keep
    /// vocabularies elsewhere than the assets directory (the extension's
    /// catalog table).
    pub fn register_vocabulary(&self, asset: VocabularyAsset) -> Result<()> {
        asset.check()?;
        self.vocab_assets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(asset.name.clone(), Arc::new(asset));
        // A built mechanism may hold the vocabulary this name meant before.
        self.built.clear();
        Ok(())
    }

    /// The released vocabulary `name`: a registered one, else
    /// `<assets>/vocabularies/<name>.json` (read once and kept).
    pub fn vocabulary_asset(&self, name: &str) -> Result<Arc<VocabularyAsset>> {
        let mut assets = self
            .vocab_assets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(a) = assets.get(name) {
            return Ok(a.clone());
        }
        let a = Arc::new(VocabularyAsset::load(&self.config.assets_dir, name)?);
        assets.insert(name.to_string(), a.clone());
        Ok(a)
    }

    /// The vocabulary a word mechanism's [`Words`] name: the embedding's
    /// own, or (with a released vocabulary) the GloVe words restricted to it.
    pub fn words(&self, words: &Words) -> Result<Arc<Vocabulary>> {
        let which = words.embedding;
        let Some(name) = words.vocabulary.as_deref() else {
            return self.vocabulary(which);
        };
        let asset = self.vocabulary_asset(name)?;
        let key = (asset.name.clone(), asset.digest.clone());
        if let Some(v) = self
            .restricted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            return Ok(v.clone());
        }
        let base = self.vocabulary(which)?;
        let v = Arc::new(Vocabulary::restricted(
            &base,
            &asset,
            self.config.cache_bytes,
        )?);
        self.restricted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, v.clone());
        Ok(v)
    }

    /// Typed PII spans of `text` (byte offsets), from the token classifier
    /// (loaded on first use, one intra-op thread per `model_threads`) and
    /// the rule recognizers.
    pub fn detect(&self, text: &str) -> Result<Vec<Span>> {
        self.check_size(text, true)?;
        let _scope = self.scope();
        let detector = self.model()?;
        detector.detect(text)
    }

    /// [`Engine::detect`] of each of `texts`, in order, the model's calls
    /// shared among them ([`Detector::detect_many`]): the same spans, faster
    /// for many short values. A value over the limit gets its
    /// `InputTooLarge` and the others go on; the outer error is for what
    /// fails them all (the model does not load).
    pub fn detect_many(&self, texts: &[&str]) -> Result<Vec<Result<Vec<Span>>>> {
        let _scope = self.scope();
        let detector = self.model()?;
        Ok(self.each_within_limit(texts, true, |ok| detector.detect_many(ok)))
    }

    /// NDD of the edit `a -> b` under the settings' masked LM: limits as
    /// for detection (the model reads every token of both texts).
    pub fn ndd(
        &self,
        a: &str,
        b: &str,
        mu: f64,
        divergence: crate::mechanisms::ndd::Divergence,
    ) -> Result<f64> {
        self.check_size(a, true)?;
        self.check_size(b, true)?;
        let mlm = self.mlm()?;
        let scorer = crate::mechanisms::ndd::Scorer::new(&mlm, mu, divergence)?;
        self.cancellable(|| scorer.ndd(a, b))
    }

    /// Sets the custom recognizers, allow list and threshold every
    /// detection of this engine uses from now on (docs/detection.md).
    pub fn set_recognizers(&self, custom: Arc<crate::detect::custom::Custom>) {
        let slot = self
            .detector
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(d) = slot.as_ref() {
            d.set_custom(custom.clone());
        }
        *self
            .custom
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = custom;
    }

    /// The custom recognizers, allow list and threshold this engine's
    /// detection uses ([`Engine::set_recognizers`]): what another engine
    /// must be given to detect the same spans.
    pub fn recognizers(&self) -> Arc<crate::detect::custom::Custom> {
        self.custom
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The detector (model and dictionaries), loaded on first use.
    fn model(&self) -> Result<Arc<Detector>> {
        let mut slot = self
            .detector
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        let started = std::time::Instant::now();
        let m = Arc::new(Detector::load_on(
            &self.config.assets_dir,
            self.config.model_threads,
            self.config.device,
        )?);
        m.model().set_batch(self.config.detect_batch);
        m.set_custom(
            self.custom
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        );
        tracing::info!(
            ms = started.elapsed().as_millis() as u64,
            "detection model loaded"
        );
        *slot = Some(m.clone());
        Ok(m)
    }

    /// The masked LM of the settings (`mlm_model`, `device`), loaded once per
    /// (directory, device) and cached.
    pub fn mlm(&self) -> Result<Arc<MaskedLm>> {
        let dir = self
            .config
            .mlm_model
            .clone()
            .unwrap_or_else(|| self.config.assets_dir.join(crate::mlm::MODEL_DIR));
        let key = (dir.clone(), self.config.device);
        self.mlms
            .try_get_with(key, || {
                let started = std::time::Instant::now();
                let m = MaskedLm::load(
                    &self.config.assets_dir.join(crate::detect::model::ORT_LIB),
                    &dir,
                    self.config.model_threads,
                    self.config.device,
                    self.config.mlm_batch,
                )?;
                tracing::info!(
                    ms = started.elapsed().as_millis() as u64,
                    dir = %dir.display(),
                    device = m.device().name(),
                    "masked LM loaded"
                );
                Ok::<_, Error>(Arc::new(m))
            })
            .map_err(|e: Arc<Error>| match Arc::try_unwrap(e) {
                Ok(e) => e,
                Err(e) => match &*e {
                    Error::MissingAsset { asset, path } => Error::MissingAsset {
                        asset: asset.clone(),
                        path: path.clone(),
                    },
                    other => Error::Model(other.to_string()),
                },
            })
    }

    /// The vocabulary for `which` if it is already loaded (never loads).
    pub fn loaded(&self, which: EmbeddingChoice) -> Option<Arc<Vocabulary>> {
        let slot = match which {
            EmbeddingChoice::Glove => &self.glove,
            EmbeddingChoice::Wordpiece => &self.wordpiece,
        };
        slot.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The mechanism `spec` describes, built once and kept while it is
    /// among the [`crate::mechanisms::cache::CAPACITY`] most recently used
    /// specs: what every front end calls per value. Registering a
    /// vocabulary forgets every built mechanism.
    ///
    /// ```no_run
    /// use dptext_core::{Engine, EngineConfig};
    /// use dptext_core::mechanisms::MechanismSpec;
    /// let engine = Engine::new(EngineConfig::new(dptext_core::assets::resolve_dir(None)));
    /// let spec = MechanismSpec::parse("santext", &serde_json::json!({"eps": 3})).unwrap();
    /// let a = engine.mechanism(&spec).unwrap();
    /// let b = engine.mechanism(&spec.clone()).unwrap();
    /// assert!(std::sync::Arc::ptr_eq(&a, &b));
    /// ```
    pub fn mechanism(&self, spec: &MechanismSpec) -> Result<Arc<dyn Mechanism>> {
        if let Some(m) = self.built.get(spec) {
            return Ok(m);
        }
        // Built outside the cache's lock: a CusText mapping takes minutes.
        let m: Arc<dyn Mechanism> = self.build(spec)?.into();
        self.built.insert(spec.clone(), m.clone());
        Ok(m)
    }

    /// Builds the mechanism `spec` describes, every time (callers with one
    /// spec per value, such as a date shift grouped per patient, would
    /// fill [`Engine::mechanism`]'s cache).
    pub fn build(&self, spec: &MechanismSpec) -> Result<Box<dyn Mechanism>> {
        spec.validate()?;
        // Mapping builds run for minutes: cancellable.
        let _scope = self.scope();
        Ok(match spec {
            MechanismSpec::SanText(s) => Box::new(SanText::from_spec(self.words(&s.words)?, s)?),
            MechanismSpec::SanTextPlus(s) => {
                Box::new(SanTextPlus::from_spec(self.words(&s.words)?, s)?)
            }
            MechanismSpec::CusText(s) => {
                let vocab = self.words(&s.words)?;
                let name = vocab.embeddings().name().to_string();
                let m = self.mapping(&vocab, (name, s.k, s.mapping, s.metric))?;
                Box::new(CusText::from_spec(vocab, m, s)?)
            }
            MechanismSpec::Deidentify(d) => {
                Box::new(Deidentify::from_spec(self.model()?, d.clone())?)
            }
            MechanismSpec::Chain(stages) => Box::new(crate::mechanisms::chain::Chain::new(
                stages
                    .iter()
                    .map(|s| self.build(s))
                    .collect::<Result<Vec<_>>>()?,
            )?),
            MechanismSpec::Ndd(s) => {
                Box::new(NddDistort::from_spec(self.model()?, self.mlm()?, s)?)
            }
        })
    }

    /// The CusText mapping for a key, from memory, the disk cache in
    /// `<assets>/custext/`, or built (once per process).
    fn mapping(&self, vocab: &Vocabulary, key: MappingKey) -> Result<Arc<Mapping>> {
        let mut maps = self
            .mappings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(m) = maps.get(&key) {
            return Ok(m.clone());
        }
        let dir = self.config.assets_dir.join("custext");
        let small = vocab.release().is_some() && vocab.embeddings().len() <= SMALL_VOCABULARY_WORDS;
        let report = |done: usize, total: usize| {
            if let Some(f) = &self.build_progress {
                (f.0)(done, total);
            }
        };
        let m = Arc::new(if small {
            // Built in memory: cheap, and no file per vocabulary version.
            Mapping::build_with_progress(
                vocab.embeddings(),
                key.1,
                key.2,
                key.3,
                self.config.model_threads.max(1),
                &report,
            )?
        } else {
            Mapping::load_or_build_with_progress(
                vocab.embeddings(),
                &dir,
                key.1,
                key.2,
                key.3,
                self.config.build_mappings,
                &report,
            )?
        });
        maps.insert(key, m.clone());
        Ok(m)
    }

    /// Sanitizes `text` with `mechanism`, drawing randomness as `mode` says,
    /// after checking the mechanism's input limit ([`Engine::limit`]).
    /// `context` adds caller-chosen parts (row, column) to the keyed stream.
    pub fn run(
        &self,
        mechanism: &dyn Mechanism,
        text: &str,
        mode: &RandomMode,
        context: &[&[u8]],
    ) -> Result<Sanitized> {
        self.check_size(text, mechanism.uses_detection())?;
        if let Some(e) = key_refusal(mechanism, mode) {
            return Err(e);
        }
        let _scope = self.scope();
        let mut rng = value_rng(mechanism, &mechanism.params(), text, mode, context);
        mechanism.sanitize(text, &mut rng, mode)
    }

    /// [`Engine::run`] of each of `texts`, in order, with the same outputs
    /// (each value's random stream is its own), through
    /// [`Mechanism::sanitize_many`]: mechanisms that run detection share
    /// the model's calls among the values. A value over the limit gets its
    /// `InputTooLarge`, and one value's error leaves the others alone.
    pub fn run_many(
        &self,
        mechanism: &dyn Mechanism,
        texts: &[&str],
        mode: &RandomMode,
        context: &[&[u8]],
    ) -> Vec<Result<Sanitized>> {
        if key_refusal(mechanism, mode).is_some() {
            return texts
                .iter()
                .filter_map(|_| key_refusal(mechanism, mode))
                .map(Err)
                .collect();
        }
        let _scope = self.scope();
        let params = mechanism.params();
        self.each_within_limit(texts, mechanism.uses_detection(), |ok| {
            let mut rngs: Vec<_> = ok
                .iter()
                .map(|text| value_rng(mechanism, &params, text, mode, context))
                .collect();
            let mut values: Vec<(&str, &mut dyn rand::RngCore)> = ok
                .iter()
                .zip(rngs.iter_mut())
                .map(|(text, rng)| (*text, rng as &mut dyn rand::RngCore))
                .collect();
            mechanism.sanitize_many(&mut values, mode)
        })
    }

    /// `f` over the values of `texts` within [`Engine::limit`], its results
    /// put back in `texts`' order; each value over the limit gets its
    /// `InputTooLarge`.
    fn each_within_limit<T>(
        &self,
        texts: &[&str],
        detection: bool,
        f: impl FnOnce(&[&str]) -> Vec<Result<T>>,
    ) -> Vec<Result<T>> {
        let checks: Vec<Result<()>> = texts
            .iter()
            .map(|t| self.check_size(t, detection))
            .collect();
        let ok: Vec<&str> = texts
            .iter()
            .zip(&checks)
            .filter(|(_, c)| c.is_ok())
            .map(|(t, _)| *t)
            .collect();
        let mut done = f(&ok).into_iter();
        checks
            .into_iter()
            .map(|c| match c {
                Ok(()) => done.next().unwrap_or_else(|| {
                    Err(Error::Model("a batch returned too few results".into()))
                }),
                Err(e) => Err(e),
            })
            .collect()
    }

    /// Finds (or builds) the mechanism and runs it in one call.
    ///
    /// ```no_run
    /// use dptext_core::{Engine, EngineConfig, RandomMode};
    /// use dptext_core::mechanisms::MechanismSpec;
    /// let engine = Engine::new(EngineConfig::new(dptext_core::assets::resolve_dir(None)));
    /// let spec = MechanismSpec::parse("santext", &serde_json::json!({"eps": 3})).unwrap();
    /// let out = engine.sanitize(&spec, "the patient has a fever", &RandomMode::Seeded(1)).unwrap();
    /// println!("{} (worst case eps {})", out.text, out.cost.worst_case_eps);
    /// ```
    pub fn sanitize(
        &self,
        spec: &MechanismSpec,
        text: &str,
        mode: &RandomMode,
    ) -> Result<Sanitized> {
        let m = self.mechanism(spec)?;
        self.run(m.as_ref(), text, mode, &[])
    }
}

/// The refusal of a mechanism whose parameters need a secret key
/// ([`Mechanism::needs_key`]) under any other random mode.
fn key_refusal(mechanism: &dyn Mechanism, mode: &RandomMode) -> Option<Error> {
    match (mechanism.needs_key(), mode) {
        (Some(why), RandomMode::Os | RandomMode::Seeded(_)) => Some(Error::invalid(
            "key",
            format!("{why}: set dptext.key_file (SQL) or --key-file (the command line) to a secret key file"),
        )),
        _ => None,
    }
}

/// The random stream of one value: keyed by the mechanism, its parameters,
/// the value and the caller's `context` parts (row, column).
fn value_rng(
    mechanism: &dyn Mechanism,
    params: &str,
    text: &str,
    mode: &RandomMode,
    context: &[&[u8]],
) -> crate::rng::DpRng {
    let mut parts: Vec<&[u8]> = vec![
        mechanism.name().as_bytes(),
        params.as_bytes(),
        text.as_bytes(),
    ];
    parts.extend_from_slice(context);
    mode.rng_for(&parts)
}
