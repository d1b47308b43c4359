//! What the engine loads on first use and keeps: vocabularies (GloVe,
//! WordPiece, released ones and their restrictions), CusText mappings
//! (from the disk cache, or built) and masked language models.

use std::sync::Arc;

use crate::assets::{GLOVE_DIR, WORDPIECE_DIR};
use crate::embeddings::Embeddings;
use crate::error::{Error, Result};
use crate::mechanisms::custext::Mapping;
use crate::mechanisms::{EmbeddingChoice, Vocabulary, Words};
use crate::mlm::MaskedLm;
use crate::vocab::VocabularyAsset;

use super::{Engine, MappingKey, SMALL_VOCABULARY_WORDS};

impl Engine {
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

    /// The CusText mapping for a key, from memory, the disk cache in
    /// `<assets>/custext/`, or built (once per process).
    pub(super) fn mapping(&self, vocab: &Vocabulary, key: MappingKey) -> Result<Arc<Mapping>> {
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
}
