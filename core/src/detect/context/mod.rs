//! Context rules over words: names, places and organisations that need a
//! dictionary and the words around them, not a pattern alone.
//!
//! - **Names** from a title (`Dr.`, `Mrs.`), a field label (`Attending:`,
//!   `PCP:`, `cc:`, `Dictated by`), a credential after them (`, MD`), a
//!   relative before them (`daughter Irena`), a first name followed by a
//!   surname from the census lists (`Maria Lopez`), dictation and typist
//!   codes (`XGT:holmes`, `GPP/church/olinger`), and every repeat in the
//!   text of a name found once.
//! - **Places** from the gazetteer: names of two or more words on their
//!   own, one-word names after `in`, `from`, `near` and the like or before
//!   a state; street addresses and `City, ST 01103` are rules ([`super::rules`]).
//! - **Organisations** ending in a facility word (`Hospital`, `Family
//!   Medicine`, `Nursing and Rehabilitation Center`), `St. Agnes`, and
//!   acronyms introduced in parentheses after one (`(MGH)`) with their repeats.
//!
//! Clinical and common vocabulary ([`super::vocab`]) is never a name or a
//! place on its own.

use std::collections::HashSet;

mod derived;
mod edges;
mod shapes;
mod words;

use super::lexicon::Lexicon;
use super::vocab::{is_common, is_name_word, is_vocabulary};
use super::{Label, Source, Span};
use edges::{id_prefix_before, organisation_tail, person_initials, site_code_before};
use names::names;
use organisations::organisations;
use places::{address_towns, places, unlisted_places};
use words::{CREDENTIALS, FACILITY};

mod names;
mod organisations;
mod places;

/// A word: letters and digits, with inner apostrophes and hyphens.
#[derive(Debug, Clone, Copy)]
struct Word {
    start: usize,
    end: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `Holmes`, `McDonald`, `O'Brien`.
    Cap,
    /// `HOLMES` (two letters or more).
    Upper,
    /// `M` (a single capital, maybe with a period after it).
    Initial,
    /// `holmes`.
    Lower,
    /// Anything with a digit.
    Other,
}

fn words(text: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if !c.is_alphanumeric() {
            continue;
        }
        let mut end = i + c.len_utf8();
        while let Some(&(j, d)) = it.peek() {
            let next = text[j + d.len_utf8()..].chars().next();
            if d.is_alphanumeric() {
                end = j + d.len_utf8();
                it.next();
            } else if matches!(d, '\'' | '’' | '-') && next.is_some_and(char::is_alphabetic) {
                // A possessive `'s` ends the word and is no word itself.
                let rest = &text[j + d.len_utf8()..];
                let possessive = d != '-'
                    && rest.starts_with(['s', 'S'])
                    && !rest[1..].starts_with(|c: char| c.is_alphabetic());
                it.next();
                if possessive {
                    it.next();
                    break;
                }
            } else {
                break;
            }
        }
        out.push(Word { start: i, end });
    }
    out
}

fn shape(w: &str) -> Shape {
    let mut chars = w.chars();
    let Some(first) = chars.next() else {
        return Shape::Other;
    };
    if w.chars().any(|c| c.is_numeric()) {
        return Shape::Other;
    }
    let letters: Vec<char> = w.chars().filter(|c| c.is_alphabetic()).collect();
    if letters.len() == 1 {
        return if first.is_uppercase() {
            Shape::Initial
        } else {
            Shape::Lower
        };
    }
    if letters.iter().all(|c| c.is_uppercase()) {
        Shape::Upper
    } else if first.is_uppercase() {
        Shape::Cap
    } else {
        Shape::Lower
    }
}

fn is_credential(w: &str) -> bool {
    let u = w.trim_end_matches('.').to_uppercase();
    CREDENTIALS.contains(&u.as_str())
}

/// The context rules' spans in `text`; `seeds` are the spans other layers
/// found (their names are repeated wherever they occur again).
pub fn find(text: &str, lex: &Lexicon, seeds: &[Span]) -> Vec<Span> {
    let ws = words(text);
    let mut out = Vec::new();
    names(text, &ws, lex, &mut out);
    organisations(text, &ws, &mut out);
    let mut places_found = Vec::new();
    places(text, &ws, lex, &out, &mut places_found);
    unlisted_places(text, &ws, &out, &mut places_found);
    out.extend(places_found);
    address_towns(text, &ws, seeds, &mut out);
    repeats(text, &ws, lex, seeds, &mut out);
    shapes::complete(text, lex, seeds, &mut out);
    // A span found here or by the model whose edges the layers above
    // miss: an organisation's store or union number, branch or ampersand
    // tail; a person's initial glued before the name (`C.Ortiz`, a
    // system's user display) or after a comma (`ROSENQUIST, H`); a site's
    // code before a record number (`GRMC 5590314`).
    let grown: Vec<Span> = out
        .iter()
        .chain(seeds)
        .filter_map(|s| {
            let (start, end) = match s.label {
                Label::Organization => (s.start, organisation_tail(text, &ws, s.end)),
                Label::Person => person_initials(text, s.start, s.end),
                Label::Id => (
                    site_code_before(text, s.start, s.end)
                        .or_else(|| id_prefix_before(text, s.start))?,
                    s.end,
                ),
                _ => return None,
            };
            (start < s.start || end > s.end).then(|| Span {
                start,
                end,
                ..s.clone()
            })
        })
        .collect();
    out.extend(grown);
    // Initials and logins made from the names found (`LRM`, `tnakashima`).
    let persons: Vec<&Span> = out
        .iter()
        .chain(seeds)
        .filter(|s| s.label == Label::Person)
        .collect();
    for (start, end) in derived::find(text, &persons) {
        push(&mut out, start, end, Label::Person, "derived", 0.8);
    }
    let orgs: Vec<&Span> = out
        .iter()
        .chain(seeds)
        .filter(|s| s.label == Label::Organization)
        .collect();
    let found = derived::acronyms(text, &orgs);
    // Not inside a span of another label (`HPCC 7704 1192`, a record number).
    let inside = |a: usize, b: usize| {
        out.iter()
            .chain(seeds)
            .any(|s| s.start <= a && b <= s.end && (s.start, s.end) != (a, b))
    };
    let found: Vec<(usize, usize)> = found.into_iter().filter(|&(a, b)| !inside(a, b)).collect();
    for (start, end) in found {
        push(&mut out, start, end, Label::Organization, "derived", 0.8);
    }
    out
}

fn push(
    out: &mut Vec<Span>,
    start: usize,
    end: usize,
    label: Label,
    name: &'static str,
    score: f32,
) {
    if end > start {
        out.push(Span {
            start,
            end,
            label,
            score,
            source: Source::Rule(name),
        });
    }
}

/// The index of the first word starting at or after `at`.
fn word_at(ws: &[Word], at: usize) -> usize {
    ws.partition_point(|w| w.start < at)
}

/// A name of up to four words from word `i` on: capitalised words and
/// initials, `LAST, FIRST` once after a single surname; stops at a line
/// break, vocabulary and credentials. `lower` also takes lower-case words.
fn name_run(text: &str, ws: &[Word], i: usize, lower: bool) -> Option<(usize, usize)> {
    name_run_with(text, ws, i, lower, None)
}

/// [`name_run`]; with a lexicon, `LAST, FIRST` joins only before a known
/// first name or in capitals (`Ortiz, Lakeview Clinic` is a name and a clinic).
fn name_run_with(
    text: &str,
    ws: &[Word],
    i: usize,
    lower: bool,
    lex: Option<&Lexicon>,
) -> Option<(usize, usize)> {
    let mut end_word = None;
    let mut count = 0;
    let mut comma_used = false;
    let mut j = i;
    while j < ws.len() && count < 4 {
        let w = &text[ws[j].start..ws[j].end];
        if j > i {
            let gap = &text[ws[j - 1].end..ws[j].start];
            let prev = &text[ws[j - 1].start..ws[j - 1].end];
            // `T. Okonkwo`, not `Ybarra. MRN`: a period only after an initial.
            let plain = gap == " " || gap == ". " && shape(prev) == Shape::Initial;
            let next = &text[ws[j].start..ws[j].end];
            let comma = (gap == ", " || gap == ",")
                && !comma_used
                && count == 1
                && lex.is_none_or(|l| {
                    l.first(next).is_some()
                        || shape(next) == Shape::Upper
                            && shape(&text[ws[i].start..ws[i].end]) == Shape::Upper
                })
                && !is_vocabulary(next);
            if !(plain || comma) {
                break;
            }
            if comma {
                comma_used = true;
            }
        }
        let s = shape(w);
        let ok = match s {
            Shape::Cap | Shape::Upper => !is_vocabulary(w) && !is_credential(w),
            Shape::Initial => true,
            Shape::Lower => lower && !is_common(w) && count == 0,
            Shape::Other => false,
        };
        if !ok {
            break;
        }
        if s != Shape::Initial || count > 0 {
            end_word = Some(j);
        }
        count += 1;
        j += 1;
    }
    let last = end_word?;
    // A trailing initial belongs to the name (`HELENA M`); a leading one only with more.
    let mut end = ws[last].end;
    if last + 1 < j {
        end = ws[j - 1].end;
    }
    Some((ws[i].start, end))
}

/// Every other occurrence of a word of a found name (`Mrs. Kowalczyk` ...
/// `Kowalczyk`), in capitals or capitalised; and of found organisations.
fn repeats(text: &str, ws: &[Word], lex: &Lexicon, seeds: &[Span], out: &mut Vec<Span>) {
    let mut names: HashSet<String> = HashSet::new();
    let mut orgs: HashSet<String> = HashSet::new();
    for s in seeds.iter().chain(out.iter()) {
        let (set, min) = match s.label {
            Label::Person => (&mut names, 3),
            Label::Organization => (&mut orgs, 0),
            _ => continue,
        };
        if s.label == Label::Organization {
            let t = text[s.start..s.end].to_ascii_uppercase();
            if t.split_whitespace().count() >= 2 {
                // The name without its facility words: `Maple Grove` of
                // `Maple Grove Nursing and Rehabilitation`.
                let lower = t.to_ascii_lowercase();
                if let Some(f) = FACILITY.iter().filter(|f| f.len() > 3).find(|f| {
                    lower.ends_with(&format!(" {f}")) || lower.contains(&format!(" {f} "))
                }) {
                    let cut = lower.find(&format!(" {f}")).unwrap_or(t.len());
                    let stem = t[..cut].trim().to_string();
                    let place = lex.place(&stem).is_some();
                    if !place
                        && (stem.split_whitespace().count() >= 2
                            || stem.len() >= 6 && !is_common(&stem))
                    {
                        set.insert(stem);
                    }
                }
                set.insert(t);
            }
            continue;
        }
        for w in words(&text[s.start..s.end]) {
            let t = &text[s.start + w.start..s.start + w.end];
            if t.chars().count() >= min && !is_vocabulary(t) && !is_credential(t) {
                set.insert(t.to_uppercase());
            }
        }
    }
    let mut found = Vec::new();
    for w in ws {
        let t = &text[w.start..w.end];
        let before = text[..w.start].trim_end_matches([' ', '\t']);
        let sentence_start = before.is_empty() || before.ends_with(['.', '\n', ':', '!', '?']);
        if matches!(shape(t), Shape::Cap | Shape::Upper)
            && names.contains(&t.to_uppercase())
            && !(is_name_word(t) && sentence_start)
        {
            found.push((w.start, w.end, Label::Person));
        }
    }
    if !orgs.is_empty() {
        // ASCII upper case keeps every byte offset; the names were upper-cased alike.
        let upper = text.to_ascii_uppercase();
        {
            for o in &orgs {
                let mut at = 0;
                while let Some(p) = upper[at..].find(o.as_str()) {
                    let s = at + p;
                    found.push((s, s + o.len(), Label::Organization));
                    at = s + o.len();
                }
            }
        }
    }
    let already: HashSet<(usize, usize, Label)> = seeds
        .iter()
        .chain(out.iter())
        .map(|s| (s.start, s.end, s.label))
        .collect();
    let within = |s: usize, e: usize, l: Label| {
        seeds
            .iter()
            .any(|x| x.label == l && x.start <= s && e <= x.end)
    };
    for (s, e, l) in found {
        // Not a repeat: the found span itself, or a word of it.
        if already.contains(&(s, e, l)) || within(s, e, l) {
            continue;
        }
        let score = if l == Label::Organization { 0.86 } else { 0.75 };
        push(out, s, e, l, "repeat", score);
    }
    // A capital initial before a found name belongs to it (`T. Okonkwo`).
    let mut widened = Vec::new();
    for sp in out.iter().filter(|s| s.label == Label::Person) {
        let before = &text[..sp.start];
        let b = before.as_bytes();
        if b.len() >= 3
            && b[b.len() - 1] == b' '
            && b[b.len() - 2] == b'.'
            && b[b.len() - 3].is_ascii_uppercase()
            && (b.len() == 3 || !b[b.len() - 4].is_ascii_alphanumeric())
        {
            widened.push(Span {
                start: sp.start - 3,
                ..sp.clone()
            });
        }
    }
    out.extend(widened);
}

#[cfg(test)]
mod tests;
