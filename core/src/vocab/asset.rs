//! A released vocabulary as a named asset:
//! `<assets>/vocabularies/<name>.json`.
//!
//! The file holds only what the release made public (the words, in their
//! noisy-count order) and how it was made (eps, delta, noise, threshold,
//! `k`, the embedding, the time): no exact count of values or words, which
//! would not be differentially private. A SHA-256 of the word list guards
//! the content and names the version: mechanisms put it into their
//! parameters, so a vocabulary rebuilt under the same name never shares a
//! random stream with the old one. Files are written whole (a temporary
//! file renamed into place) and a name is never overwritten unless asked.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::dpsu::{Noise, Release, ReleaseParams};
use crate::cost::VocabularyCost;
use crate::embeddings::Embeddings;
use crate::error::{Error, Result};

/// Directory of vocabulary assets inside the assets directory.
pub const VOCABULARIES_DIR: &str = "vocabularies";
/// The file format written by this version.
pub const FORMAT: u32 = 1;

/// A released vocabulary and how it was released.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VocabularyAsset {
    /// File format version ([`FORMAT`]).
    pub format: u32,
    /// The name mechanisms refer to it by ([`super::check_name`]).
    pub name: String,
    /// What it was drawn from, in the builder's words (a file, a column).
    pub source: String,
    /// Privacy parameter of the release.
    pub eps: f64,
    /// delta of the release.
    pub delta: f64,
    /// `laplace` or `gaussian`.
    pub noise: String,
    /// The threshold noisy counts had to exceed.
    pub threshold: f64,
    /// Distinct words one value contributed at most.
    pub max_words_per_value: usize,
    /// When it was built (RFC 3339, UTC).
    pub created: String,
    /// The embedding it was intersected with (e.g. `glove-6b-50d`).
    pub embedding: String,
    /// Rows of that embedding that were loaded (`dptext.glove_words`).
    pub embedding_rows: usize,
    /// SHA-256 of the word list (each word followed by a newline), hex.
    pub digest: String,
    /// The released words, largest noisy count first.
    pub words: Vec<String>,
}

impl VocabularyAsset {
    /// The asset for a release of `params` over `emb`, named `name`.
    pub fn new(
        name: &str,
        source: &str,
        params: &ReleaseParams,
        release: Release,
        emb: &Embeddings,
    ) -> Result<Self> {
        super::check_name(name)?;
        Ok(VocabularyAsset {
            format: FORMAT,
            name: name.to_string(),
            source: source.to_string(),
            eps: params.eps,
            delta: params.delta,
            noise: params.noise.name().to_string(),
            threshold: release.threshold,
            max_words_per_value: params.max_words_per_value,
            created: super::time::now_rfc3339(),
            embedding: emb.name().to_string(),
            embedding_rows: emb.len(),
            digest: digest(&release.words),
            words: release.words,
        })
    }

    /// Checks the name, the format, the parameters and the digest.
    pub fn check(&self) -> Result<()> {
        super::check_name(&self.name)?;
        let corrupt =
            |reason: String| Error::invalid("vocabulary", format!("{}: {reason}", self.name));
        if self.format != FORMAT {
            return Err(corrupt(format!(
                "format {} is not {FORMAT}: rebuild it with this version",
                self.format
            )));
        }
        let noise: Noise = self.noise.parse()?;
        ReleaseParams {
            eps: self.eps,
            delta: self.delta,
            max_words_per_value: self.max_words_per_value,
            noise,
        }
        .validate()?;
        if digest(&self.words) != self.digest {
            return Err(corrupt(
                "its words do not match its digest: rebuild it".to_string(),
            ));
        }
        Ok(())
    }

    /// What mechanisms that use it report in their cost.
    pub fn cost(&self) -> VocabularyCost {
        VocabularyCost {
            name: self.name.clone(),
            eps: self.eps,
            delta: self.delta,
            digest: self.digest.clone(),
        }
    }

    /// Where the vocabulary `name` lives under `assets_dir`.
    pub fn path(assets_dir: &Path, name: &str) -> Result<PathBuf> {
        super::check_name(name)?;
        Ok(assets_dir
            .join(VOCABULARIES_DIR)
            .join(format!("{name}.json")))
    }

    /// Writes the asset; an existing vocabulary of that name is an error
    /// unless `replace`.
    pub fn save(&self, assets_dir: &Path, replace: bool) -> Result<PathBuf> {
        self.check()?;
        let path = Self::path(assets_dir, &self.name)?;
        if !replace && path.exists() {
            return Err(Error::invalid(
                "vocabulary",
                format!(
                    "{} already exists at {}: choose another name, or replace it (mechanisms that used it then draw differently)",
                    self.name,
                    path.display()
                ),
            ));
        }
        let dir = assets_dir.join(VOCABULARIES_DIR);
        fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let tmp = dir.join(format!(".{}.json.tmp{}", self.name, std::process::id()));
        let text = serde_json::to_string_pretty(self)?;
        fs::write(&tmp, text).map_err(|e| Error::io(&tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        Ok(path)
    }

    /// Reads and checks the vocabulary `name` from `assets_dir`.
    pub fn load(assets_dir: &Path, name: &str) -> Result<Self> {
        let path = Self::path(assets_dir, name)?;
        let text = fs::read_to_string(&path).map_err(|e| match e.kind() {
            // No machine path in the message: SQL regression output must
            // not depend on where the assets are.
            std::io::ErrorKind::NotFound => Error::invalid(
                "vocabulary",
                format!(
                    "no vocabulary named {name:?}: build one with `dptext vocab build` or dptext.build_vocabulary() (it is looked for in dptext.vocabularies in SQL, and in <assets>/{VOCABULARIES_DIR}/)"
                ),
            ),
            _ => Error::io(&path, e),
        })?;
        let asset: VocabularyAsset =
            serde_json::from_str(&text).map_err(|e| Error::CorruptAsset {
                asset: format!("vocabulary {name}"),
                path: path.clone(),
                reason: e.to_string(),
            })?;
        if asset.name != name {
            return Err(Error::CorruptAsset {
                asset: format!("vocabulary {name}"),
                path,
                reason: format!("the file names itself {:?}", asset.name),
            });
        }
        asset.check()?;
        Ok(asset)
    }

    /// The names of the vocabularies under `assets_dir`, sorted.
    pub fn list(assets_dir: &Path) -> Result<Vec<String>> {
        let dir = assets_dir.join(VOCABULARIES_DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(&dir, e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            let file = entry.file_name();
            let Some(name) = file.to_str().and_then(|f| f.strip_suffix(".json")) else {
                continue;
            };
            if super::check_name(name).is_ok() {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }
}

/// SHA-256 of a word list (each word followed by a newline), hex.
pub fn digest(words: &[String]) -> String {
    let mut h = Sha256::new();
    for w in words {
        h.update(w.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embeddings::tests::synthetic;
    use crate::vocab::dpsu::Counter;

    fn built(name: &str) -> VocabularyAsset {
        let emb = synthetic(20, 4, 5);
        let params = ReleaseParams {
            eps: 5.0,
            delta: 1e-3,
            max_words_per_value: 2,
            noise: Noise::Laplace,
        };
        let mut c = Counter::new(&emb, params).unwrap();
        for _ in 0..200 {
            c.add("w1 w2");
        }
        let r = c.finish(&crate::RandomMode::Seeded(1)).unwrap();
        VocabularyAsset::new(name, "test", &params, r, &emb).unwrap()
    }

    #[test]
    fn save_load_list_and_refuse_overwrite() {
        let dir = tempdir("save");
        let a = built("notes");
        assert_eq!(a.words.len(), 2);
        let path = a.save(&dir, false).unwrap();
        assert!(path.ends_with("vocabularies/notes.json"));
        assert_eq!(VocabularyAsset::load(&dir, "notes").unwrap(), a);
        assert_eq!(VocabularyAsset::list(&dir).unwrap(), ["notes"]);
        let again = a.save(&dir, false).unwrap_err().to_string();
        assert!(again.contains("already exists"), "{again}");
        a.save(&dir, true).unwrap();
        let missing = VocabularyAsset::load(&dir, "other").unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("no vocabulary named \"other\""),
            "{missing}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tampered_words_and_bad_names_are_refused() {
        let dir = tempdir("tamper");
        let mut a = built("notes");
        a.save(&dir, false).unwrap();
        a.words.push("extra".into());
        let text = serde_json::to_string(&a).unwrap();
        fs::write(dir.join("vocabularies/notes.json"), text).unwrap();
        let e = VocabularyAsset::load(&dir, "notes")
            .unwrap_err()
            .to_string();
        assert!(e.contains("do not match its digest"), "{e}");
        for bad in ["../x", "a/b", "", ".hidden", "a.b", &"x".repeat(64)] {
            assert!(VocabularyAsset::path(&dir, bad).is_err(), "{bad}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dptext-vocab-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }
}
