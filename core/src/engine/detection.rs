//! Detection through the engine: the detector loaded on first use with
//! the user's recognizers, and the calls that run it (one value, many, NDD).

use std::sync::Arc;

use crate::detect::Detector;
use crate::detect::Span;
use crate::error::Result;

use super::Engine;

impl Engine {
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
    pub(super) fn model(&self) -> Result<Arc<Detector>> {
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
}
