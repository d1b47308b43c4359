//! The detection dictionaries: first and last names with their
//! frequencies (the 1990 US Census lists, asset `names`) and a place
//! gazetteer (US places of 1,000 people or more, US counties and cities
//! of 100,000 elsewhere, from GeoNames, asset `places`).

use std::collections::HashMap;
use std::path::Path;

use super::vocab;
use crate::error::{Error, Result};

/// The names asset directory inside the assets directory.
pub const NAMES_DIR: &str = "names";
/// The places asset directory inside the assets directory.
pub const PLACES_DIR: &str = "places";
/// The drug names asset directory inside the assets directory.
pub const DRUGS_DIR: &str = "drugs";
/// The medical abbreviations asset directory inside the assets directory.
pub const ABBREVIATIONS_DIR: &str = "abbreviations";
/// The ICD-10-CM words asset directory inside the assets directory.
pub const ICD10CM_DIR: &str = "icd10cm";

/// Name and place dictionaries, keyed in upper case.
#[derive(Debug, Default)]
pub struct Lexicon {
    first: HashMap<String, f32>,
    last: HashMap<String, f32>,
    places: HashMap<String, u64>,
    /// The most words in one place name.
    place_words: usize,
    /// Drug names, brand and official (asset `drugs`), upper case; one
    /// that is also a census name is left out ([`Lexicon::is_clinical_word`]).
    drugs: std::collections::HashSet<String>,
    /// Words of ICD-10-CM's diagnosis descriptions (asset `icd10cm`),
    /// upper case, census names left out: findings and anatomy.
    clinical: std::collections::HashSet<String>,
    /// Medical abbreviations in capitals (asset `abbreviations`), census
    /// names left out: labs, exam shorthand, report words.
    abbreviations: std::collections::HashSet<String>,
}

fn read(path: &Path, asset: &str) -> Result<String> {
    if !path.exists() {
        return Err(Error::MissingAsset {
            asset: asset.into(),
            path: path.to_path_buf(),
        });
    }
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

/// `key\tvalue` rows; `#` lines are comments.
fn rows<'a>(text: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once('\t'))
}

impl Lexicon {
    /// Loads both assets from an assets directory.
    pub fn load(assets: &Path) -> Result<Self> {
        let names = assets.join(NAMES_DIR);
        let mut lex = Lexicon::default();
        for (file, map) in [("first.tsv", &mut lex.first), ("last.tsv", &mut lex.last)] {
            for (k, v) in rows(&read(&names.join(file), NAMES_DIR)?) {
                map.insert(k.to_uppercase(), v.parse().unwrap_or(0.0));
            }
        }
        for (k, v) in rows(&read(
            &assets.join(PLACES_DIR).join("places.tsv"),
            PLACES_DIR,
        )?) {
            lex.add_place(k, v.parse().unwrap_or(0));
        }
        let drugs = read(&assets.join(DRUGS_DIR).join("drugs.txt"), DRUGS_DIR)?;
        lex.add_drugs(drugs.lines().filter(|l| !l.starts_with('#')));
        let words = read(&assets.join(ICD10CM_DIR).join("words.txt"), ICD10CM_DIR)?;
        lex.add_clinical_words(words.lines().filter(|l| !l.starts_with('#')));
        let abbreviations = read(
            &assets.join(ABBREVIATIONS_DIR).join("abbreviations.txt"),
            ABBREVIATIONS_DIR,
        )?;
        lex.add_abbreviations(abbreviations.lines().filter(|l| !l.starts_with('#')));
        Ok(lex)
    }

    /// Whether `w` (upper case) is a census first name or surname.
    fn census(&self, w: &str) -> bool {
        self.first.contains_key(w) || self.last.contains_key(w)
    }

    /// Adds words of findings and anatomy (any case); census names among
    /// them are left out (`Addison`, `Parkinson`).
    pub fn add_clinical_words<'a>(&mut self, words: impl IntoIterator<Item = &'a str>) {
        for w in words {
            let u = w.trim().to_uppercase();
            if u.len() >= 4 && !self.census(&u) {
                self.clinical.insert(u);
            }
        }
    }

    /// Adds medical abbreviations (kept as written, in capitals); census
    /// names and US states' codes among them are left out (`CA`, `PA`,
    /// `IN` are places as often as terms).
    pub fn add_abbreviations<'a>(&mut self, words: impl IntoIterator<Item = &'a str>) {
        for w in words {
            let w = w.trim();
            if w.len() >= 2 && !self.census(w) && !vocab::STATE_CODES.split('|').any(|s| s == w) {
                self.abbreviations.insert(w.to_string());
            }
        }
    }

    /// Whether `word` is clinical vocabulary: a drug's name or a word of
    /// a diagnosis (any case, census names excepted: `Xanax`, `Femoral`,
    /// `OBESITY`), or a medical abbreviation written in capitals (`CTAB`,
    /// `CO2`, `MIBI` when the list has it).
    pub fn is_clinical(&self, word: &str) -> bool {
        self.is_clinical_word(word) || self.abbreviations.contains(word)
    }

    /// Whether `word` (any case) is a drug's name or a word of a
    /// diagnosis, census names excepted (not an abbreviation).
    pub fn is_clinical_word(&self, word: &str) -> bool {
        let u = word.to_uppercase();
        self.drugs.contains(&u) || self.clinical.contains(&u)
    }

    /// Adds drug names (any case); census names among them are left out.
    pub fn add_drugs<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) {
        for n in names {
            let u = n.trim().to_uppercase();
            if !u.is_empty() && !self.census(&u) {
                self.drugs.insert(u);
            }
        }
    }

    /// A lexicon from explicit lists (tests, custom dictionaries).
    pub fn from_lists(first: &[&str], last: &[&str], places: &[&str]) -> Self {
        let mut lex = Lexicon::default();
        for f in first {
            lex.first.insert(f.to_uppercase(), 0.1);
        }
        for l in last {
            lex.last.insert(l.to_uppercase(), 0.01);
        }
        for p in places {
            lex.add_place(p, 10_000);
        }
        lex
    }

    fn add_place(&mut self, name: &str, population: u64) {
        self.place_words = self.place_words.max(name.split_whitespace().count());
        let e = self.places.entry(name.to_uppercase()).or_insert(0);
        *e = (*e).max(population);
    }

    /// The census share (percent) of a first name, any case.
    pub fn first(&self, word: &str) -> Option<f32> {
        self.first.get(&word.to_uppercase()).copied()
    }

    /// The census share (percent) of a surname, any case.
    pub fn last(&self, word: &str) -> Option<f32> {
        self.last.get(&word.to_uppercase()).copied()
    }

    /// Whether `word` is a first name or a surname.
    pub fn is_name(&self, word: &str) -> bool {
        let u = word.to_uppercase();
        self.first.contains_key(&u) || self.last.contains_key(&u)
    }

    /// The population of a place, any case (0 for counties).
    pub fn place(&self, name: &str) -> Option<u64> {
        self.places.get(&name.to_uppercase()).copied()
    }

    /// The most words in one place name.
    pub fn place_words(&self) -> usize {
        self.place_words
    }
}
