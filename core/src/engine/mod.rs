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

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::cancel::{CancelCheck, Scope};
use crate::detect::Detector;
use crate::embeddings::MapFn;
use crate::error::{Error, Result};
use crate::mechanisms::cache::MechanismCache;
use crate::mechanisms::custext::{self, Mapping};
use crate::mechanisms::deidentify::Deidentify;
use crate::mechanisms::ndd::NddDistort;
use crate::mechanisms::{
    CusText, Mechanism, MechanismSpec, SanText, SanTextPlus, Sanitized, Vocabulary,
};
use crate::mlm::MaskedLm;
use crate::rng::RandomMode;
use crate::runtime::Device;
use crate::vocab::VocabularyAsset;

mod config;
mod detection;
mod loaders;

pub use config::{
    EngineConfig, DEFAULT_BUILD_MAPPINGS, DEFAULT_CACHE_BYTES, DEFAULT_DETECT_BATCH,
    DEFAULT_DEVICE, DEFAULT_GLOVE_WORDS, DEFAULT_MAX_DETECT_BYTES, DEFAULT_MAX_INPUT_BYTES,
    DEFAULT_MLM_BATCH, DEFAULT_MODEL_THREADS, SMALL_VOCABULARY_WORDS,
};

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
