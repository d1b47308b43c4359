//! Span detection: typed PII spans with byte offsets (docs/mechanisms.md).
//!
//! Two sources feed one list: the Rampart token classifier
//! ([`model::NerModel`], ONNX, when its assets are installed) and the rule
//! recognizers ([`rules`]). Overlaps are resolved deterministically by
//! [`resolve`]: longer spans win; at equal length a rule (whose pattern and
//! checksum matched exactly) wins over the model; then the earlier span;
//! then the label order of [`Label`].

pub mod annotated;
#[cfg(test)]
mod batched;
mod clinical;
pub mod context;
pub mod custom;
pub mod eval;
mod hl7;
pub mod lexicon;
pub mod model;
pub mod rules;
mod times;
pub mod vocab;

use serde::Serialize;

/// The coarse, documented label set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Label {
    /// Given names and surnames.
    Person,
    /// Street addresses, building numbers, cities, states, zip codes.
    Location,
    /// Hospitals, clinics, universities, companies, banks.
    Organization,
    /// Dates and times.
    Date,
    /// Ages over 89 (a HIPAA identifier).
    Age,
    /// E-mail addresses, phone numbers, URLs, IP addresses.
    Contact,
    /// Identifiers: SSN, tax, passport, licence, bank, card, IBAN, medical record numbers.
    Id,
}

impl std::str::FromStr for Label {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        Ok(match s {
            "PERSON" => Label::Person,
            "LOCATION" => Label::Location,
            "ORGANIZATION" => Label::Organization,
            "DATE" => Label::Date,
            "AGE" => Label::Age,
            "CONTACT" => Label::Contact,
            "ID" => Label::Id,
            other => {
                return Err(crate::Error::invalid(
                    "label",
                    format!("unknown label {other:?}"),
                ))
            }
        })
    }
}

impl Label {
    /// Every label, in order.
    pub const ALL: [Label; 7] = [
        Label::Person,
        Label::Location,
        Label::Organization,
        Label::Date,
        Label::Age,
        Label::Contact,
        Label::Id,
    ];

    /// The label's position in [`Label::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The label as SQL shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Person => "PERSON",
            Label::Location => "LOCATION",
            Label::Organization => "ORGANIZATION",
            Label::Date => "DATE",
            Label::Age => "AGE",
            Label::Contact => "CONTACT",
            Label::Id => "ID",
        }
    }
}

/// Where a span came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Source {
    /// The token classifier.
    Model,
    /// A rule recognizer, by name.
    Rule(&'static str),
}

/// A detected span: `&text[start..end]` is the value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Span {
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
    /// Coarse label.
    pub label: Label,
    /// Confidence in [0, 1] (the model's mean probability, a rule's fixed score).
    pub score: f32,
    /// Which recognizer found it.
    pub source: Source,
}

/// Resolves overlaps: keeps a set of pairwise disjoint spans, returned in
/// text order. Rules (patterns, checksums, context) go first, longer
/// before shorter, then earlier, then the lower label; then the model's
/// spans, longer first, each dropped when it overlaps a kept span of
/// another label and merged into the kept spans of its own label when it
/// overlaps only those (the model widens `Lopez` to `Maria Lopez`).
pub fn resolve(mut spans: Vec<Span>) -> Vec<Span> {
    spans.retain(|s| s.end > s.start);
    spans.sort_by(|a, b| {
        matches!(a.source, Source::Model)
            .cmp(&matches!(b.source, Source::Model))
            .then((b.end - b.start).cmp(&(a.end - a.start)))
            .then(b.score.total_cmp(&a.score))
            .then(a.start.cmp(&b.start))
            .then(a.label.cmp(&b.label))
    });
    // Kept spans by start; they are disjoint, so a candidate can only
    // collide with its neighbours: O(n log n) for rules, and a model span
    // touches only the few kept spans inside it.
    let mut kept: std::collections::BTreeMap<usize, Span> = std::collections::BTreeMap::new();
    for s in spans {
        let first = kept
            .range(..=s.start)
            .next_back()
            .filter(|(_, k)| k.end > s.start)
            .map_or(s.start, |(&k, _)| k);
        let hits: Vec<usize> = kept.range(first..s.end).map(|(&k, _)| k).collect();
        if hits.is_empty() {
            kept.insert(s.start, s);
            continue;
        }
        if !matches!(s.source, Source::Model) || hits.iter().any(|k| kept[k].label != s.label) {
            continue;
        }
        let mut merged = s;
        for k in hits {
            if let Some(old) = kept.remove(&k) {
                merged.start = merged.start.min(old.start);
                merged.end = merged.end.max(old.end);
                // The kept (rule) span's source and score: deterministic,
                // whatever the model's probabilities were.
                merged.source = old.source;
                merged.score = old.score;
            }
        }
        kept.insert(merged.start, merged);
    }
    kept.into_values().collect()
}

/// Rules and, when given, the model; overlaps resolved. Without a
/// lexicon the context rules are skipped (the engine always passes both:
/// a missing model or dictionary is an error, not a silent fall-back).
pub fn detect(text: &str, model: Option<&model::NerModel>) -> crate::Result<Vec<Span>> {
    detect_with(text, model, None)
}

/// Every layer: rules, the model (per window and per line, lines in
/// capitals read in title case), then the context rules over the
/// dictionaries, seeded with what the others found; model guesses that
/// are only clinical vocabulary are dropped.
pub fn detect_with(
    text: &str,
    model: Option<&model::NerModel>,
    lexicon: Option<&lexicon::Lexicon>,
) -> crate::Result<Vec<Span>> {
    Ok(resolve(detect_layers(text, model, lexicon)?))
}

/// Every layer's spans before overlaps are resolved.
fn detect_layers(
    text: &str,
    model: Option<&model::NerModel>,
    lexicon: Option<&lexicon::Lexicon>,
) -> crate::Result<Vec<Span>> {
    crate::cancel::check()?;
    let guesses = match model {
        Some(m) => m.spans_many(&[text], lexicon.is_some()).pop().transpose()?,
        None => None,
    };
    layers_with(text, guesses, lexicon)
}

/// Every layer's spans before overlaps are resolved, the model's
/// `guesses` (per window and, with a lexicon, per line) given.
fn layers_with(
    text: &str,
    guesses: Option<Vec<Span>>,
    lexicon: Option<&lexicon::Lexicon>,
) -> crate::Result<Vec<Span>> {
    crate::cancel::check()?;
    let mut spans = rules::find(text);
    spans.extend(hl7::find(text));
    if let Some(mut guesses) = guesses {
        guesses.retain(|s| {
            !only_vocabulary(text, s, lexicon)
                || lexicon.is_some_and(|l| lower_case_name(text, s, l))
        });
        guesses.retain(|s| !too_few_digits(&text[s.start..s.end], s.label));
        if let Some(lex) = lexicon {
            guesses.retain(|s| s.label != Label::Location || place_evidence(text, s, lex));
        }
        spans.extend(guesses);
    }
    if let Some(lex) = lexicon {
        crate::cancel::check()?;
        let found = context::find(text, lex, &spans);
        spans.extend(found);
        spans.retain(|s| !clinical::not_phi(text, s, lex));
    }
    Ok(spans)
}

/// A model name, place or organisation needs a word of two letters or
/// more, capitalised or in capitals, that is not clinical or common
/// vocabulary nor clinical vocabulary (the lexicon's: drugs, diagnoses' words, abbreviations):
/// `ABDOMEN`, `Pulse`, `heparin`, `q6h`, `T 36.4`, `Xanax` and `Zantac` are
/// dropped.
fn only_vocabulary(text: &str, s: &Span, lexicon: Option<&lexicon::Lexicon>) -> bool {
    if !matches!(
        s.label,
        Label::Person | Label::Location | Label::Organization
    ) {
        return false;
    }
    let t = &text[s.start..s.end];
    !t.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 2)
        .any(|w| {
            w.chars().all(char::is_alphabetic)
                && w.starts_with(char::is_uppercase)
                && !vocab::is_common(w)
                && !lexicon.is_some_and(|l| l.is_clinical_word(w))
        })
}

/// A model contact or ID with too few digits to be one: a phone number
/// has seven or more, an identifier five or more (`x4410`, `mFOLFOX6`,
/// `2.6-18.5`, `210\t400` in a flowsheet are lab values, regimens and
/// extensions); an e-mail address or URL has its own marks. The rules
/// find the short forms they know (`pager 4-0156`, `MRN 12345`).
fn too_few_digits(t: &str, label: Label) -> bool {
    let digits = t.bytes().filter(u8::is_ascii_digit).count();
    match label {
        Label::Contact => {
            digits < 7
                && !t.contains('@')
                && !t.contains("://")
                && !t.to_lowercase().contains("www.")
        }
        Label::Id => digits < 5,
        _ => false,
    }
}

/// A model name in lower case (`richard cruz` in a chat) stands when one
/// of its words is a census first name and none is vocabulary.
fn lower_case_name(text: &str, s: &Span, lex: &lexicon::Lexicon) -> bool {
    let ws: Vec<&str> = text[s.start..s.end]
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| w.len() >= 2)
        .collect();
    s.label == Label::Person
        && !ws.is_empty()
        && ws
            .iter()
            .any(|w| lex.first(w).is_some() && !vocab::is_common(w))
        && ws.iter().all(|w| !vocab::is_vocabulary(w))
}

/// A model place needs evidence: a gazetteer name in it, a zip code, a
/// house number or a street word (`Glu 244`, `HR 118, T 39.6` are not places).
fn place_evidence(text: &str, s: &Span, lex: &lexicon::Lexicon) -> bool {
    let t = &text[s.start..s.end];
    let ws: Vec<&str> = t
        .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '-')
        .filter(|w| !w.is_empty())
        .collect();
    let street = |w: &str| {
        matches!(
            w.to_lowercase().as_str(),
            "street"
                | "st"
                | "road"
                | "rd"
                | "avenue"
                | "ave"
                | "boulevard"
                | "blvd"
                | "lane"
                | "ln"
                | "drive"
                | "dr"
                | "way"
                | "court"
                | "ct"
                | "terrace"
                | "place"
                | "circle"
                | "parkway"
                | "highway"
                | "route"
                | "apt"
                | "suite"
                | "unit"
        )
    };
    let zip = |w: &str| w.len() == 5 && w.chars().all(|c| c.is_ascii_digit());
    ws.iter().any(|w| street(w) || zip(w))
        || (0..ws.len()).any(|i| {
            (1..=3.min(ws.len() - i)).any(|n| {
                let name = ws[i..i + n].join(" ");
                name.chars().next().is_some_and(char::is_uppercase)
                    && lex.place(&name).is_some()
                    && !vocab::is_common(&name)
            })
        })
}

/// The detector the engine uses: the token classifier, the dictionaries
/// and the user's own recognizers ([`custom`]).
#[derive(Debug)]
pub struct Detector {
    model: model::NerModel,
    lexicon: lexicon::Lexicon,
    custom: std::sync::RwLock<std::sync::Arc<custom::Custom>>,
}

impl Detector {
    /// Loads the model and the dictionaries from an assets directory (the
    /// model on the CPU).
    pub fn load(assets: &std::path::Path, threads: usize) -> crate::Result<Self> {
        Self::load_on(assets, threads, crate::runtime::Device::Cpu)
    }

    /// [`Detector::load`] with the model on `device` (CUDA falls back to
    /// the CPU with one warning).
    pub fn load_on(
        assets: &std::path::Path,
        threads: usize,
        device: crate::runtime::Device,
    ) -> crate::Result<Self> {
        Ok(Detector {
            model: model::NerModel::load_on(assets, threads, device)?,
            lexicon: lexicon::Lexicon::load(assets)?,
            custom: Default::default(),
        })
    }

    /// Typed spans of `text`, every layer and the custom recognizers, the
    /// allow list and the threshold applied, then overlaps resolved.
    pub fn detect(&self, text: &str) -> crate::Result<Vec<Span>> {
        self.detect_many(&[text])
            .pop()
            .unwrap_or_else(|| Ok(Vec::new()))
    }

    /// [`Detector::detect`] of each of `texts`, in order, with the model's
    /// windows and lines of all the texts sharing model calls
    /// ([`model::NerModel::spans_many`]): the same spans as text by text,
    /// in fewer calls when the texts are short. One text's error (a failed
    /// model call holds the error of every text it read) leaves the others
    /// alone; a cancel stops every text not finished.
    pub fn detect_many(&self, texts: &[&str]) -> Vec<crate::Result<Vec<Span>>> {
        let custom = self.custom();
        let guesses = self.model.spans_many(texts, true);
        texts
            .iter()
            .zip(guesses)
            .map(|(text, guesses)| {
                let mut spans = layers_with(text, Some(guesses?), Some(&self.lexicon))?;
                if !custom.is_empty() {
                    spans.extend(custom.find(text));
                    // Before overlaps are resolved: a dropped span must not
                    // have displaced a kept one (a long low-score span over
                    // an SSN).
                    custom.filter(text, &mut spans);
                }
                Ok(resolve(spans))
            })
            .collect()
    }

    /// Replaces the custom recognizers (the extension reloads them when
    /// `dptext.recognizers` changes; the CLI sets them once).
    pub fn set_custom(&self, custom: std::sync::Arc<custom::Custom>) {
        *self
            .custom
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = custom;
    }

    /// The custom recognizers in force.
    pub fn custom(&self) -> std::sync::Arc<custom::Custom> {
        self.custom
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The token classifier.
    pub fn model(&self) -> &model::NerModel {
        &self.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: usize, end: usize, label: Label, source: Source) -> Span {
        Span {
            start,
            end,
            label,
            score: 1.0,
            source,
        }
    }

    /// A model guess that is only a drug's name (the FDA's list) is not a
    /// person or a place; a drug name that is also a census name stays a
    /// name; a name beside a drug still stands.
    #[test]
    fn drug_names_are_not_people() {
        let mut lex = lexicon::Lexicon::from_lists(&["Maria"], &["Oliver", "Lopez"], &[]);
        lex.add_drugs(["XANAX", "ZANTAC", "OLIVER", "METOPROLOL"]);
        let text = "Xanax 0.5 mg, Zantac prn, per Oliver; Maria Lopez on Metoprolol";
        let at = |w: &str| text.find(w).unwrap();
        let guesses = vec![
            span(at("Xanax"), at("Xanax") + 5, Label::Person, Source::Model),
            span(
                at("Zantac"),
                at("Zantac") + 6,
                Label::Location,
                Source::Model,
            ),
            span(at("Oliver"), at("Oliver") + 6, Label::Person, Source::Model),
            span(at("Maria"), at("Maria") + 11, Label::Person, Source::Model),
            span(
                at("Metoprolol"),
                at("Metoprolol") + 10,
                Label::Organization,
                Source::Model,
            ),
        ];
        let kept: Vec<&str> = layers_with(text, Some(guesses), Some(&lex))
            .unwrap()
            .into_iter()
            .filter(|s| s.source == Source::Model)
            .map(|s| &text[s.start..s.end])
            .collect();
        assert_eq!(kept, ["Oliver", "Maria Lopez"]);
    }

    #[test]
    fn overlaps_resolve_deterministically() {
        let r = resolve(vec![
            span(0, 5, Label::Person, Source::Model),
            span(3, 12, Label::Contact, Source::Rule("email")),
            span(20, 25, Label::Person, Source::Model),
            span(20, 25, Label::Date, Source::Rule("time")),
            span(30, 30, Label::Id, Source::Model),
        ]);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].start, r[0].label), (3, Label::Contact), "longer wins");
        assert_eq!(
            (r[1].start, r[1].label),
            (20, Label::Date),
            "rule wins a tie"
        );
        // Many overlapping spans resolve quickly (this was quadratic).
        let many: Vec<Span> = (0..200_000)
            .map(|i| span(i * 3, i * 3 + 5, Label::Date, Source::Rule("time")))
            .collect();
        let started = std::time::Instant::now();
        assert_eq!(resolve(many).len(), 100_000);
        assert!(started.elapsed().as_secs() < 5);
        // Order of the input does not matter.
        let mut shuffled = vec![
            span(20, 25, Label::Date, Source::Rule("time")),
            span(3, 12, Label::Contact, Source::Rule("email")),
            span(20, 25, Label::Person, Source::Model),
            span(0, 5, Label::Person, Source::Model),
        ];
        shuffled.reverse();
        assert_eq!(resolve(shuffled), r);
    }

    #[test]
    fn detect_without_model_uses_rules() {
        let t = "Seen 2024-01-03, call (555) 123-4567 or mail a.b@example.org.";
        let labels: Vec<(Label, &str)> = detect(t, None)
            .unwrap()
            .iter()
            .map(|s| (s.label, &t[s.start..s.end]))
            .collect();
        assert_eq!(
            labels,
            [
                (Label::Date, "2024-01-03"),
                (Label::Contact, "(555) 123-4567"),
                (Label::Contact, "a.b@example.org")
            ]
        );
    }
}

#[cfg(test)]
mod quality {
    use super::*;

    /// The project's clinical notes (tests/data/clinical, written fresh and
    /// annotated per HIPAA category): the floors of docs/detection.md.
    #[test]
    fn clinical_notes_meet_the_floors() {
        let Some(detector) = crate::assets::load_or_skip(|dir| Detector::load(dir, 2)) else {
            return;
        };
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/clinical");
        let notes = annotated::read_dir(dir.as_ref()).expect("tests/data/clinical");
        assert!(notes.len() >= 60, "{} notes", notes.len());
        let mut report = eval::Report::default();
        for (_, note) in &notes {
            let pred: Vec<eval::Labelled> = detector
                .detect(&note.text)
                .expect("detect")
                .iter()
                .map(|s| (s.start, s.end, s.label))
                .collect();
            report.add_note(note, &pred);
        }
        let all = report.recall_total();
        assert!(all.recall() >= 0.97, "span recall {:.3}", all.recall());
        for (c, t) in &report.categories {
            assert!(
                t.recall() >= 0.95,
                "{}: span recall {:.3} of {}",
                c.as_str(),
                t.recall(),
                t.gold
            );
        }
        let p = report.precision_total();
        assert!(p.precision() >= 0.85, "span precision {:.3}", p.precision());
    }

    /// The older template set (scripts/gen_detection_eval.py): overlap
    /// recall stays at or above 0.95 for the labels it covers.
    #[test]
    fn recall_on_the_template_set() {
        let Some(detector) = crate::assets::load_or_skip(|dir| Detector::load(dir, 2)) else {
            return;
        };
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/detection_eval.jsonl"
        );
        let text = std::fs::read_to_string(path).expect("evaluation set");
        let mut totals = std::collections::BTreeMap::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json line");
            let t = v["text"].as_str().expect("text");
            let gold: Vec<eval::Labelled> = v["spans"]
                .as_array()
                .expect("spans")
                .iter()
                .map(|s| {
                    let label = s[2].as_str().expect("label").parse().expect("known label");
                    (
                        s[0].as_u64().expect("start") as usize,
                        s[1].as_u64().expect("end") as usize,
                        label,
                    )
                })
                .collect();
            let pred: Vec<eval::Labelled> = detector
                .detect(t)
                .expect("detect")
                .iter()
                .map(|s| (s.start, s.end, s.label))
                .collect();
            eval::add(&mut totals, &gold, &pred);
        }
        for label in [
            Label::Person,
            Label::Date,
            Label::Contact,
            Label::Id,
            Label::Location,
        ] {
            let (_, overlap) = totals[&label];
            assert!(
                overlap.recall() >= 0.95,
                "{label:?}: recall {:.3}",
                overlap.recall()
            );
        }
    }
}
