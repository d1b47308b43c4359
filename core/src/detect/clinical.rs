//! The clinical vocabulary layer, run after every other layer: a name,
//! place or organisation made only of clinical vocabulary (drugs, the
//! words of diagnoses, medical abbreviations: the lexicon's) is not PHI
//! unless context says so; neither is an eponym before its clinical head
//! noun (`Murphy sign`, `Tanner stage`), nor a model "ID" that is a
//! measurement (`CO2`, `T 97.6`, `0.82`, an ICD-10 code).

use super::lexicon::Lexicon;
use super::vocab;
use super::{Label, Source, Span};

/// Nouns an eponym names a clinical thing before: `Murphy sign`,
/// `Schmorl nodes`, `Braden score`, `Stokes-Adams attacks`.
const EPONYM_HEADS: &[&str] = &[
    "sign",
    "signs",
    "score",
    "scale",
    "stage",
    "stages",
    "disease",
    "syndrome",
    "node",
    "nodes",
    "maneuver",
    "maneuvers",
    "manoeuvre",
    "manoeuvres",
    "test",
    "reflex",
    "criteria",
    "classification",
    "fracture",
    "attack",
    "attacks",
    "phenomenon",
    "triad",
    "palsy",
    "position",
    "procedure",
    "operation",
    "incision",
    "catheter",
    "line",
    "murmur",
    "ulcer",
    "lymphoma",
    "tumor",
    "tumour",
    "body",
    "bodies",
    "cells",
    "point",
    "law",
    "rule",
    "index",
    "grade",
];

/// True when span `s` of `text` is clinical vocabulary rather than PHI.
pub(super) fn not_phi(text: &str, s: &Span, lex: &Lexicon) -> bool {
    match s.label {
        Label::Person | Label::Location | Label::Organization => {
            !after_honorific(text, s.start)
                && (vocabulary_only(&text[s.start..s.end], s.label, lex)
                    || (s.label == Label::Person && eponym(text, s)))
        }
        Label::Id => s.source == Source::Model && measurement(&text[s.start..s.end], lex),
        _ => false,
    }
}

/// Its words of two letters or more are all common or clinical
/// vocabulary, one at least clinical, and none a census first name that is
/// not vocabulary (the clinical lists hold no census name) (`Femoral`, `Groin abscess`, `Soft, ND`; not
/// `Maria Femoral`). For a person, an abbreviation of two or three capitals
/// does not count: staff sign with initials (`DT`, `RS`, `GPP`) that are
/// abbreviations too.
fn vocabulary_only(t: &str, label: Label, lex: &Lexicon) -> bool {
    let clinical = |w: &str| {
        lex.is_clinical(w)
            && (label != Label::Person
                || lex.is_clinical_word(w)
                || w.len() >= 4
                || w.chars().any(|c| c.is_ascii_digit()))
    };
    let ws: Vec<&str> = t
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 2)
        .collect();
    !ws.is_empty()
        && ws.iter().any(|w| clinical(w))
        && ws.iter().all(|w| vocab::is_common(w) || clinical(w))
        && !ws
            .iter()
            .any(|w| lex.first(w).is_some() && !vocab::is_vocabulary(w))
}

/// A one-word name (hyphens allowed) right before an eponym's head noun,
/// with or without `'s`.
fn eponym(text: &str, s: &Span) -> bool {
    let t = &text[s.start..s.end];
    if t.split_whitespace().count() != 1 {
        return false;
    }
    let after = &text[s.end..];
    let rest = after
        .strip_prefix("'s")
        .or_else(|| after.strip_prefix("\u{2019}s"))
        .unwrap_or(after);
    let next = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphabetic())
        .collect::<String>()
        .to_lowercase();
    EPONYM_HEADS.contains(&next.as_str())
}

/// Whether the word before byte `start` is an honorific (`Dr.`, `Mrs`).
fn after_honorific(text: &str, start: usize) -> bool {
    let before = crate::text::before(text, start, 8);
    before
        .split(|c: char| !c.is_alphabetic())
        .rev()
        .find(|w| !w.is_empty())
        .is_some_and(vocab::is_honorific)
}

/// A model "ID" made only of measurements: numbers of up to three digits
/// (decimals allowed, signed), blood-pressure-like fractions, ICD-10
/// codes, clinical abbreviations and common words (`CO2`, `RR`,
/// `T 97.6`, `BP 142/88 RR`, `M25.662`). Record numbers have more digits.
fn measurement(t: &str, lex: &Lexicon) -> bool {
    let tokens: Vec<&str> = t
        .split(|c: char| c.is_whitespace() || c == ',' || c == ':' || c == ';')
        .filter(|w| !w.is_empty())
        .collect();
    !tokens.is_empty()
        && tokens.iter().all(|w| {
            small_number(w)
                || fraction(w)
                || icd10_code(w)
                || lex.is_clinical(w)
                || (w.chars().all(char::is_alphabetic) && vocab::is_common(w))
        })
}

/// `98`, `0.82`, `-12`, `104.5`: up to three digits before the point.
fn small_number(w: &str) -> bool {
    let w = w.trim_start_matches(['-', '+']);
    let (int, frac) = w.split_once('.').unwrap_or((w, ""));
    (1..=3).contains(&int.len())
        && int.chars().all(|c| c.is_ascii_digit())
        && frac.chars().all(|c| c.is_ascii_digit())
}

/// `142/88`: two numbers of two or three digits.
fn fraction(w: &str) -> bool {
    w.split_once('/').is_some_and(|(a, b)| {
        [a, b]
            .iter()
            .all(|n| (2..=3).contains(&n.len()) && n.chars().all(|c| c.is_ascii_digit()))
    })
}

/// An ICD-10 code: a letter, two digits (or digit and letter), then
/// optionally a point and up to four characters (`M25.662`, `E11.9`).
fn icd10_code(w: &str) -> bool {
    let b = w.as_bytes();
    let head = b.len() >= 3
        && b[0].is_ascii_uppercase()
        && b[1].is_ascii_digit()
        && (b[2].is_ascii_digit() || b[2].is_ascii_uppercase());
    head && match w.get(3..) {
        Some("") => true,
        Some(rest) => rest.strip_prefix('.').is_some_and(|r| {
            (1..=4).contains(&r.len()) && r.chars().all(|c| c.is_ascii_alphanumeric())
        }),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex() -> Lexicon {
        let mut l = Lexicon::from_lists(&["Maria", "Tanner"], &["Murphy", "Lopez"], &[]);
        l.add_clinical_words(["FEMORAL", "GROIN", "ABSCESS", "OBESITY", "LOPEZ"]);
        l.add_abbreviations(["CO2", "RR", "NT", "CTAB", "BP", "PA"]);
        l
    }

    fn span(text: &str, what: &str, label: Label, source: Source) -> Span {
        let start = text.find(what).unwrap();
        Span {
            start,
            end: start + what.len(),
            label,
            score: 0.9,
            source,
        }
    }

    #[test]
    fn clinical_words_are_not_names_unless_context_says_so() {
        let l = lex();
        let p = |t: &str, w: &str| not_phi(t, &span(t, w, Label::Person, Source::Model), &l);
        assert!(p("Femoral pulses 2+ bilaterally", "Femoral"));
        assert!(p("Groin abscess drained", "Groin abscess"));
        let loc = |t: &str, w: &str| not_phi(t, &span(t, w, Label::Location, Source::Model), &l);
        assert!(loc("Abd: Soft, NT, ND", "Soft, NT"));
        // A state's code is a place, not an abbreviation.
        assert!(!loc("Lives in Erie, PA", "PA"));
        // A census name stays a name; a first name beside a clinical word too.
        assert!(!p("seen by Lopez today", "Lopez"));
        assert!(!p("Maria Femoral called", "Maria Femoral"));
        // An honorific says so.
        assert!(!p("per Dr. Femoral", "Femoral"));
        // Initials that are abbreviations too stay names.
        assert!(!p("Reviewed with RR today", "RR"));
    }

    #[test]
    fn eponyms_before_their_head_noun_are_not_names() {
        let l = lex();
        let p = |t: &str, w: &str| not_phi(t, &span(t, w, Label::Person, Source::Model), &l);
        assert!(p("Murphy sign negative", "Murphy"));
        assert!(p("Murphy's sign negative", "Murphy"));
        assert!(p("Tanner stage 2", "Tanner"));
        assert!(p("h/o Stokes-Adams attacks", "Stokes-Adams"));
        assert!(!p("Murphy signed the form", "Murphy"));
        assert!(!p("Tanner came with his mother", "Tanner"));
    }

    #[test]
    fn measurements_are_not_ids_but_record_numbers_are() {
        let l = lex();
        let id = |t: &str, w: &str, src: Source| not_phi(t, &span(t, w, Label::Id, src), &l);
        assert!(id("CO2 27.8", "CO2", Source::Model));
        assert!(id("BP 142/88  RR 18", "BP 142/88  RR", Source::Model));
        assert!(id("Cr 0.82", "0.82", Source::Model));
        assert!(id("dx M25.662 knee stiffness", "M25.662", Source::Model));
        assert!(!id("MRN 580486", "580486", Source::Model));
        assert!(!id("ID XW277/90683", "XW277/90683", Source::Model));
        // Rules' IDs are left alone.
        assert!(!id("CO2 27.8", "CO2", Source::Rule("labelled_id")));
    }
}
