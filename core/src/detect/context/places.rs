//! Places: gazetteer names of two or more words on their own, one-word
//! names in a place's context (`in`, `from`, `near`, before a state), towns
//! of addresses, and unlisted places a residence word introduces.

use std::sync::OnceLock;

use regex::Regex;

use crate::detect::lexicon::Lexicon;
use crate::detect::vocab::{is_common, is_vocabulary, STATE_CODES};
use crate::detect::{Label, Span};

use super::words::STATES;
use super::{push, shape, word_at, Shape, Word};

/// Words after which a one-word gazetteer name is a place.
fn place_context() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)(?:\b(?:in|from|to|near|of|at|outside|lives|living|resides|residing|moved|born|visiting|visited|returned|native|towards?|around|via|city|town|village|county|home)[\ \t]+|(?:city|town|residence|address|hometown|birthplace|location|lives|county)[\ \t]*:[\ \t]*)$")
            .unwrap_or_else(|e| panic!("place context: {e}"))
    })
}

fn state_after() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(&format!(
            r"^,?[ \t]+(?:(?i:{STATES})\b|(?:{STATE_CODES})\b)"
        ))
        .unwrap_or_else(|e| panic!("state after: {e}"))
    })
}

pub(super) fn places(text: &str, ws: &[Word], lex: &Lexicon, found: &[Span], out: &mut Vec<Span>) {
    let mut i = 0;
    let longest = lex.place_words().clamp(1, 5);
    while i < ws.len() {
        let w = &text[ws[i].start..ws[i].end];
        if !matches!(shape(w), Shape::Cap | Shape::Upper) {
            i += 1;
            continue;
        }
        let mut matched = None;
        for n in (1..=longest).rev() {
            if i + n > ws.len() {
                continue;
            }
            let run = &ws[i..i + n];
            let spaced = run.windows(2).all(|p| {
                let g = &text[p[0].end..p[1].start];
                g == " " || g == ". " && text[p[0].start..p[0].end].len() <= 3
            });
            if !spaced {
                continue;
            }
            let name = &text[run[0].start..run[n - 1].end];
            if run.iter().any(|x| {
                !matches!(
                    shape(&text[x.start..x.end]),
                    Shape::Cap | Shape::Upper | Shape::Initial
                )
            }) {
                continue;
            }
            if lex.place(name).is_some() {
                matched = Some((n, name));
                break;
            }
        }
        let Some((n, name)) = matched else {
            i += 1;
            continue;
        };
        let (s, e) = (ws[i].start, ws[i + n - 1].end);
        let inside_other = found
            .iter()
            .any(|f| f.start <= s && e <= f.end && f.label != Label::Location);
        let common = name.split_whitespace().all(is_common);
        let before = crate::text::before(text, s, 24);
        let context = place_context().is_match(before) || state_after().is_match(&text[e..]);
        let multi = n >= 2 && !name.split_whitespace().any(|x| is_common(x) && x.len() > 3);
        let person_like = name.split_whitespace().any(|x| lex.is_name(x));
        let ok = !inside_other && !common && (context || multi && !person_like);
        if ok {
            push(
                out,
                s,
                e,
                Label::Location,
                "place",
                if context { 0.85 } else { 0.75 },
            );
            i += n;
        } else {
            i += 1;
        }
    }
    // Counties and parishes.
    static COUNTY: OnceLock<Regex> = OnceLock::new();
    let county = COUNTY.get_or_init(|| {
        Regex::new(r"\b(?:[A-Z][a-z]+[ \t]){1,3}(?:County|Parish|Borough|Township)\b")
            .unwrap_or_else(|e| panic!("county: {e}"))
    });
    for m in county.find_iter(text) {
        push(out, m.start(), m.end(), Label::Location, "county", 0.8);
    }
}

/// Where someone lives, moved or called from, just before a place:
/// `lives with her in `, `moved to `, `called from `, `son Karim in `.
fn residence_context() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?:(?i:\b(?:lives|living|live|resides|residing|reside|moved|relocated|returned|born|raised|grew up|called|calling|visiting|staying|stays|drove|driving|commutes)\b)[^.;:\n]{0,20}\b(?:in|from|to|near)|(?i:\b(?:son|daughter|brother|sister|mother|father|wife|husband|partner|niece|nephew|cousin|aunt|uncle|grandson|granddaughter|friend)\b)[ \t]+\p{Lu}\p{Ll}+[ \t]+(?:in|from))[ \t]+$")
            .unwrap_or_else(|e| panic!("residence context: {e}"))
    })
}

/// Towns no gazetteer lists (`Wexford Falls`, a neighbourhood), named
/// where someone lives, moved or called from ([`residence_context`]): one
/// to three capitalised words that are not vocabulary, on one line, not
/// already in a span.
pub(super) fn unlisted_places(text: &str, ws: &[Word], found: &[Span], out: &mut Vec<Span>) {
    let mut i = 0;
    while i < ws.len() {
        let s = ws[i].start;
        let taken = |a: usize, b: usize| {
            found
                .iter()
                .chain(out.iter())
                .any(|f| a < f.end && f.start < b)
        };
        if !residence_context().is_match(crate::text::before(text, s, 48)) {
            i += 1;
            continue;
        }
        let mut n = 0;
        while i + n < ws.len() && n < 3 {
            let w = &text[ws[i + n].start..ws[i + n].end];
            let spaced = n == 0 || &text[ws[i + n - 1].end..ws[i + n].start] == " ";
            if !spaced || !matches!(shape(w), Shape::Cap | Shape::Upper) || is_vocabulary(w) {
                break;
            }
            n += 1;
        }
        if n == 0 || taken(s, ws[i + n - 1].end) {
            i += 1;
            continue;
        }
        push(
            out,
            s,
            ws[i + n - 1].end,
            Label::Location,
            "unlisted_place",
            0.8,
        );
        i += n;
    }
}

/// The town after a street: `Mill St, Carver`, `on Maple Terrace, East Haddon`.
pub(super) fn address_towns(text: &str, ws: &[Word], seeds: &[Span], out: &mut Vec<Span>) {
    let streets: Vec<usize> = seeds
        .iter()
        .chain(out.iter())
        .filter(|s| s.label == Label::Location)
        .map(|s| s.end)
        .collect();
    for end in streets {
        if !text[end..].starts_with(", ") {
            continue;
        }
        let i = word_at(ws, end + 2);
        let mut j = i;
        while j < ws.len() && j - i < 3 {
            let w = &text[ws[j].start..ws[j].end];
            let joined = j == i || &text[ws[j - 1].end..ws[j].start] == " ";
            if !joined
                || shape(w) != Shape::Cap
                || is_vocabulary(w)
                    && !matches!(
                        w,
                        "East"
                            | "West"
                            | "North"
                            | "South"
                            | "New"
                            | "Lake"
                            | "Mount"
                            | "Fort"
                            | "Port"
                    )
            {
                break;
            }
            j += 1;
        }
        if j > i && ws[i].start == end + 2 {
            push(
                out,
                ws[i].start,
                ws[j - 1].end,
                Label::Location,
                "address_town",
                0.85,
            );
        }
    }
}
