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
use std::sync::OnceLock;

use regex::Regex;

mod derived;
mod edges;
mod shapes;
mod words;

use super::lexicon::Lexicon;
use super::vocab::{is_common, is_honorific, is_name_word, is_vocabulary, STATE_CODES};
use super::{Label, Source, Span};
use edges::{id_prefix_before, organisation_tail, person_initials, site_code_before};
use words::{CREDENTIALS, FACILITY, HOSPITAL_PREFIXES, KNOWN_ORGS, ORG_JOINERS, STATES};

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

/// Field labels and titles that a person's name follows.
fn name_triggers() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // A constant pattern, exercised by the tests below.
        Regex::new(
            r"(?x)
            (?:
              \b(?i:dr|mr|mrs|ms|mx|prof|sr|sra|srta)\.?[\ \t]+
            | \b(?:Doctor|Miss|Nurse|Sister|Father|Rev\.?|Pastor|Chaplain|Officer|Trooper|Deputy|Det\.?|Detective|Lt\.?|Capt\.?|Sgt\.?|Judge|Coach|RN|LPN|CNA|NP|PA|Dr)[\ \t]+
            | \b(?i:attending|attending\ physician|attending\ md|pcp|primary\ care(?:\ physician|\ provider)?|patient(?:\ name)?|pt\ name|pt|name|
                 referring(?:\ physician|\ provider|\ md|\ doctor|\ clinician)?|referred\ by|ref\.?\ (?:md|dr|physician)|resident|fellow|intern|surgeon|
                 assistant|assistants?|co-?surgeon|anesthesiologist|anesthesia|anesthetist|crna|provider|physician|ordering(?:\ physician|\ provider|\ md)?|
                 radiologist|pathologist|cytotechnologist|dictated\ by|signed\ by|electronically\ signed\ by|e-signed\ by|transcribed\ by|
                 typed\ by|transcriptionist|transcribed|dictated|typed|signed|registration|reg|reviewed\ by|verified\ by|prepared\ by|cc|c\.c|copies?\ to|copy\ to|interpreter|nurse|rn|
                 emergency\ contact|contact|guardian|next\ of\ kin|nok|spouse|mother|father|requested\ by|consultant|consultants|witness|
                 technologist|tech|sonographer|seen\ by|performed\ by|read\ by|reading\ physician|attested\ by|cosigned\ by|co-signed\ by|author|
                 scribe|case\ manager|social\ worker|sw|therapist|pharmacist|dietitian|chaplain|caller|called\ by|spoke\ with|spoke\ to|
                 discussed\ with|d/w|per|from|to|dear|attn|attention|insured|subscriber|policyholder|member|recipient|authorized\ by|
                 grossed\ by|accessioned\ by|collected\ by|received\ by|entered\ by|released\ by|user|operator|surgeon\(s\)|
                 admitting(?:\ physician|\ md)?|discharging(?:\ physician|\ md)?|covering|on-call|primary\ team|nurse\ practitioner|np|pa|md)
              [\ \t]*(?:\#|no\.?)?[\ \t]*[:\-][\ \t]*(?:\b(?i:dr|mr|mrs|ms)\.?[\ \t]+)?
            | \b(?i:by|with|per|from|to|for|and|cc|dear)[\ \t]+\b(?i:dr|mr|mrs|ms)\.?[\ \t]+
            )",
        )
        .unwrap_or_else(|e| panic!("name triggers: {e}"))
    })
}

/// Relatives and companions whose name follows.
fn relatives() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?i)\b(?:daughter|son|wife|husband|mother|father|mom|dad|sister|brother|niece|nephew|granddaughter|grandson|grandmother|grandfather|friend|partner|fianc[eé]e?|neighbou?r|aunt|uncle|cousin|caregiver|boyfriend|girlfriend|spouse|stepdaughter|stepson|stepmother|stepfather|roommate|sibling|twin|guardian|grandchild|child|baby|infant|patient|pt)(?:-in-law)?(?:,|\s)\s*(?:\((?-i:[A-Z])|(?:named|is|was|called)\s+)?",
        )
        .unwrap_or_else(|e| panic!("relatives: {e}"))
    })
}

/// Typist and dictation codes on a line of their own:
/// `XGT:holmes`, `GPP/church/olinger`, `--JT/mk`, `CO/ts`; or at the start
/// of a line before more (`RF/lmc   DD: 11/06/21`).
fn typist() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?m)^[ \t]*(?:-{1,2}[ \t]*)?([A-Za-z]{2,4}|[A-Za-z][a-z]{2,14})[ \t]*[:/][ \t]*([A-Za-z]{2,15})(?:[ \t]*/[ \t]*([A-Za-z]{2,15}))?(?:[ \t]*/[ \t]*([A-Za-z]{2,15}))?[ \t]*$|(?m)^[ \t]*([A-Z]{2,4})/([a-z]{2,4})(?:[ \t]{2,}|[ \t]*$)")
            .unwrap_or_else(|e| panic!("typist: {e}"))
    })
}

/// Initials where a signer's go: `by ACT`, `/mb` at a line's end, the last
/// cell of a table row (`| KL`), `Transcribed: PR`, a lone `cw` after a
/// sentence at the end of a line.
fn initials() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?m)by[ \t]+(?P<a>[A-Z]{2,4})\b|[ \t]/(?P<b>[a-z]{2,3})[ \t]*$|^/(?P<c>[a-z]{2,3})[ \t]*$|\|[ \t]*(?P<d>[A-Z]{2,3})[ \t]*$|(?i:initials|init|transcribed|typed|typist|signed|verified|reviewed|entered)[ \t]*:[ \t]*(?P<e>[A-Za-z]{2,4})[ \t]*$|[.)][ \t]+(?P<f>[a-z]{2,3})[ \t]*$|[-–][ \t]*(?P<g>[A-Z]{2,3})[ \t]*$")
            .unwrap_or_else(|e| panic!("initials: {e}"))
    })
}

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

/// What follows a patient's name when a note introduces them: an age
/// (`, a 65-year-old`, ` is a 45 yo`, `, age 72`) or a birth date (`(DOB`).
fn age_after() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        let age = r"\d{1,3}(?:[- ](?:year|yr)s?[- ]old\b|\s?y/?o\b)";
        Regex::new(&format!(
            r"(?:,\s?(?:an?\s)?{age}|\s(?:is|was)\san?\s{age}|,\s?age:?\s\d|\s?\(\s?DOB\b)"
        ))
        .expect("valid regex")
    })
}

/// The name that ends at byte `end` (up to four capitalised words or
/// initials, or `LAST, FIRST`), when one does: a known first name in it,
/// or two words or more none of them vocabulary (`Patient`, `The`; a lone
/// word such as `Client` is not enough); a run that
/// follows a fifth capitalised word is a heading, not a name.
fn name_before(text: &str, ws: &[Word], lex: &Lexicon, end: usize) -> Option<(usize, usize)> {
    let k = word_at(ws, end);
    if k == 0 || ws[k - 1].end != end {
        return None;
    }
    let mut first = k - 1;
    let named = |w: &Word| {
        let t = &text[w.start..w.end];
        matches!(shape(t), Shape::Cap | Shape::Upper | Shape::Initial)
            && !is_credential(t)
            && !is_honorific(t)
    };
    if !named(&ws[first]) {
        return None;
    }
    while first > 0 && k - first < 4 {
        let between = &text[ws[first - 1].end..ws[first].start];
        if !matches!(between, " " | ". " | ", ") || !named(&ws[first - 1]) {
            break;
        }
        first -= 1;
    }
    if first > 0
        && named(&ws[first - 1])
        && matches!(&text[ws[first - 1].end..ws[first].start], " " | ". " | ", ")
    {
        return None;
    }
    // `Patient Dylan Robinson (DOB ...`: the name starts after the last
    // vocabulary word of the run.
    while first + 1 < k && is_vocabulary(&text[ws[first].start..ws[first].end]) {
        first += 1;
    }
    let run: Vec<&str> = ws[first..k].iter().map(|w| &text[w.start..w.end]).collect();
    let known = run
        .iter()
        .any(|w| lex.first(w).is_some() && !is_vocabulary(w));
    if known || run.len() > 1 && !run.iter().any(|w| is_vocabulary(w)) {
        Some((ws[first].start, end))
    } else {
        None
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

fn names(text: &str, ws: &[Word], lex: &Lexicon, out: &mut Vec<Span>) {
    // After titles and field labels.
    for m in name_triggers().find_iter(text) {
        let i = word_at(ws, m.end());
        if i < ws.len() && ws[i].start == m.end() {
            let trigger = m.as_str().trim().to_lowercase();
            // `per`, `from`, `to` and the like name a person only before a title
            // or when the words are names.
            let weak = matches!(
                trigger.trim_end_matches([':', '-', ' ']),
                "per"
                    | "from"
                    | "to"
                    | "pt"
                    | "member"
                    | "user"
                    | "contact"
                    | "tech"
                    | "np"
                    | "pa"
                    | "md"
                    | "rn"
                    | "nurse"
                    | "name"
                    | "patient"
            );
            if let Some((s, e)) = name_run_with(text, ws, i, false, Some(lex)) {
                let run = &text[s..e];
                let any_name = run.split([' ', ',']).any(|w| lex.is_name(w));
                if !weak
                    || any_name
                    || trigger.contains("dr")
                    || trigger.contains("mr")
                    || trigger.contains("ms")
                {
                    push(out, s, e, Label::Person, "name_after_title", 0.9);
                }
            } else if m.as_str().to_lowercase().starts_with("cc")
                || m.as_str().to_lowercase().contains("by")
            {
                // `cc: RB`, `Dictated by: jt`: initials or a lone lower-case name.
                if let Some((s, e)) = name_run(text, ws, i, true) {
                    push(out, s, e, Label::Person, "name_after_title", 0.8);
                }
            }
        }
    }
    // Before credentials: `Ann Holmes, MD`, `HOLMES RN`.
    for (k, w) in ws.iter().enumerate() {
        if k == 0 || !is_credential(&text[w.start..w.end]) {
            continue;
        }
        let gap = &text[ws[k - 1].end..w.start];
        if !(gap == ", " || gap == " " || gap == ",") {
            continue;
        }
        // Credentials written in lower case are words (`do`, `pt`, `ms`).
        if text[w.start..w.end].chars().any(char::is_lowercase)
            && !text[w.start..w.end].contains('.')
        {
            continue;
        }
        // Walk back over the name.
        let mut first = k;
        while first > 0 && k - first < 4 {
            let p = &text[ws[first - 1].start..ws[first - 1].end];
            let between = &text[ws[first - 1].end..ws[first].start];
            let joins = first == k || between == " " || between == ". ";
            let sh = shape(p);
            if !joins
                || !matches!(sh, Shape::Cap | Shape::Upper | Shape::Initial)
                || is_vocabulary(p)
                || is_credential(p)
            {
                break;
            }
            first -= 1;
        }
        if first < k {
            push(
                out,
                ws[first].start,
                ws[k - 1].end,
                Label::Person,
                "name_before_credential",
                0.9,
            );
        }
    }
    // Before an age or a birth date: `Grace Long, a 65-year-old woman`,
    // `John Hill is a 45 yo M`, `HOLMES, ANN (DOB 1/2/1950)`.
    for m in age_after().find_iter(text) {
        if let Some((s, e)) = name_before(text, ws, lex, m.start()) {
            push(out, s, e, Label::Person, "name_before_age", 0.85);
        }
    }
    // After relatives: `daughter Irena`, `husband, Tom`.
    for m in relatives().find_iter(text) {
        let i = word_at(ws, m.end());
        if i < ws.len() && ws[i].start == m.end() {
            if let Some((s, e)) = name_run(text, ws, i, false) {
                let first_word = &text[ws[i].start..ws[i].end];
                if lex.is_name(first_word) || shape(first_word) == Shape::Cap {
                    push(out, s, e, Label::Person, "name_after_relative", 0.8);
                }
            }
        }
    }
    // A first name and a surname from the census lists.
    for i in 0..ws.len() {
        let w = &text[ws[i].start..ws[i].end];
        if !matches!(shape(w), Shape::Cap | Shape::Upper)
            || is_vocabulary(w)
            || lex.first(w).is_none()
        {
            continue;
        }
        let mut j = i + 1;
        // A middle initial.
        if j < ws.len()
            && shape(&text[ws[j].start..ws[j].end]) == Shape::Initial
            && matches!(&text[ws[j - 1].end..ws[j].start], " ")
        {
            j += 1;
        }
        if j >= ws.len() {
            continue;
        }
        let gap = &text[ws[j - 1].end..ws[j].start];
        if !(gap == " " || gap == ". ") {
            continue;
        }
        let v = &text[ws[j].start..ws[j].end];
        let same_case = shape(v) == shape(w) || shape(w) == Shape::Cap && shape(v) == Shape::Upper;
        let one_word_name = !(is_name_word(w) && is_name_word(v));
        if same_case
            && one_word_name
            && !is_vocabulary(v)
            && !is_credential(v)
            && (lex.last(v).is_some() || v.contains('-'))
        {
            push(
                out,
                ws[i].start,
                ws[j].end,
                Label::Person,
                "first_and_last_name",
                0.8,
            );
        }
    }
    for c in initials().captures_iter(text) {
        for g in ["a", "b", "c", "d", "e", "f", "g"] {
            if let Some(m) = c.name(g) {
                if !is_vocabulary(m.as_str()) && !is_credential(m.as_str()) {
                    push(out, m.start(), m.end(), Label::Person, "initials", 0.75);
                }
            }
        }
    }
    // `DUCHARME, KEVIN P`, `Bellamy, Augustus`: a surname, a comma and a first name.
    for i in 0..ws.len().saturating_sub(1) {
        let (a, b) = (
            &text[ws[i].start..ws[i].end],
            &text[ws[i + 1].start..ws[i + 1].end],
        );
        let gap = &text[ws[i].end..ws[i + 1].start];
        let shapes = matches!(
            (shape(a), shape(b)),
            (Shape::Upper, Shape::Upper) | (Shape::Cap, Shape::Cap)
        );
        if gap == ", "
            && shapes
            && !is_vocabulary(a)
            && !is_vocabulary(b)
            && (lex.first(b).is_some() && (lex.last(a).is_some() || !is_common(a))
                || shape(a) == Shape::Upper && lex.last(a).is_some() && !is_common(b))
        {
            if let Some((_, e)) = name_run(text, ws, i + 1, false) {
                push(out, ws[i].start, e, Label::Person, "last_comma_first", 0.8);
            }
        }
    }
    // Typist and dictation codes.
    for c in typist().captures_iter(text) {
        let whole = c.get(0).map_or("", |m| m.as_str());
        // Not `Pulse: regular` or `BP/HR`: a line like `Vitals: stable` has vocabulary.
        let parts: Vec<regex::Match> = c.iter().skip(1).flatten().collect();
        let initials_first = parts.first().is_some_and(|p| {
            p.as_str().len() <= 4 && p.as_str().chars().all(|c| c.is_ascii_uppercase())
        });
        if !initials_first && parts.iter().any(|p| is_common(p.as_str()))
            || whole.contains(": ") && parts.len() < 2
        {
            continue;
        }
        for p in parts {
            push(out, p.start(), p.end(), Label::Person, "typist_code", 0.8);
        }
    }
}

fn organisations(text: &str, ws: &[Word], out: &mut Vec<Span>) {
    // ASCII lower case keeps every byte offset (`İ` lower-cased is longer).
    let lower = text.to_ascii_lowercase();
    let mut suffixes: Vec<&str> = FACILITY.to_vec();
    suffixes.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut taken: Vec<(usize, usize)> = Vec::new();
    for (k, w) in ws.iter().enumerate() {
        // The longest facility phrase starting at this word.
        let Some(suffix) = suffixes.iter().find(|s| {
            lower[w.start..].starts_with(*s)
                && !lower[w.start + s.len()..].starts_with(|c: char| c.is_alphanumeric())
        }) else {
            continue;
        };
        let end = w.start + suffix.len();
        if taken.iter().any(|&(s, e)| w.start < e && s < end) {
            continue;
        }
        let phrase = &text[w.start..end];
        if !phrase.starts_with(|c: char| c.is_uppercase()) {
            continue;
        }
        // Walk back over capitalised words and joiners on the same line.
        let mut first = k;
        let mut proper = false;
        while first > 0 && k - first < 6 {
            let p = &text[ws[first - 1].start..ws[first - 1].end];
            let between = &text[ws[first - 1].end..ws[first].start];
            let initial = p.len() <= 2 || p.eq_ignore_ascii_case("st");
            if !(between == " "
                || between == " & "
                || between == "'s "
                || between == "’s "
                || between == "-"
                || between == "/"
                || between == ". " && initial
                || between == "'S ")
            {
                break;
            }
            let sh = shape(p);
            let joiner = ORG_JOINERS.contains(&p.to_lowercase().as_str());
            if !(matches!(sh, Shape::Cap | Shape::Upper | Shape::Initial) || joiner && first < k) {
                break;
            }
            // `RN Halvorsen at ...`, `Dr Wambui at ...`: a title or a
            // credential is a person's, not the organisation's.
            if is_honorific(p) || is_credential(p) {
                break;
            }
            if !is_common(p) && !joiner {
                proper = true;
            }
            first -= 1;
        }
        // `at` joins a name only after `The` (`The Willows at Brackenfield`);
        // else what comes before it is a person or a verb's subject
        // (`Halvorsen at Pell Harbor Anticoagulation Service`).
        if !text[ws[first].start..ws[first].end].eq_ignore_ascii_case("the") {
            if let Some(at) = (first..k)
                .rev()
                .find(|&i| &text[ws[i].start..ws[i].end] == "at")
            {
                first = at + 1;
            }
        }
        while first < k
            && ORG_JOINERS.contains(&text[ws[first].start..ws[first].end].to_lowercase().as_str())
        {
            first += 1;
        }
        // `Hospital of the Good Shepherd`: capitalised words after `of`.
        let mut end = end;
        if lower[end..].starts_with(" of ") {
            let i = word_at(ws, end + 4);
            if let Some((_, e)) = name_run(text, ws, i, false) {
                end = e;
                proper = true;
            }
        }
        if proper && first < k {
            taken.push((ws[first].start, end));
            push(
                out,
                ws[first].start,
                end,
                Label::Organization,
                "organization",
                0.85,
            );
        }
    }
    // `Mercy Redding`, `UPMC Shadyside`: a hospital word and a place or name after it.
    for (k, w) in ws.iter().enumerate() {
        let t = &text[w.start..w.end];
        if HOSPITAL_PREFIXES.contains(&t)
            && k + 1 < ws.len()
            && &text[w.end..ws[k + 1].start] == " "
        {
            let n = &text[ws[k + 1].start..ws[k + 1].end];
            if matches!(shape(n), Shape::Cap | Shape::Upper) && !is_vocabulary(n)
                || n.eq_ignore_ascii_case("west")
                || n.eq_ignore_ascii_case("east")
                || n.eq_ignore_ascii_case("general")
            {
                push(
                    out,
                    w.start,
                    ws[k + 1].end,
                    Label::Organization,
                    "hospital_prefix",
                    0.85,
                );
            }
        }
    }
    for (k, w) in ws.iter().enumerate() {
        for org in KNOWN_ORGS {
            let n = org.len();
            if text[w.start..].starts_with(org)
                && !text[w.start + n..].starts_with(|c: char| c.is_alphanumeric())
                && (k == 0 || ws[k - 1].end <= w.start)
            {
                push(
                    out,
                    w.start,
                    w.start + n,
                    Label::Organization,
                    "known_organization",
                    0.85,
                );
            }
        }
    }
    // Employers and schools: `works as a line cook at Casa Lupita`, `student at CSU Bakersfield`.
    static EMPLOYER: OnceLock<Regex> = OnceLock::new();
    let employer = EMPLOYER.get_or_init(|| {
        Regex::new(r"(?i)\b(?:works?|worked|working|employed|employee|student|studies|studying|enrolled|attends|retired|laid off|fired|job|volunteers?|intern(?:ship)?)\b[^.\n;]{0,30}?\b(?:at|for|by|from|with)[ \t]+")
            .unwrap_or_else(|e| panic!("employer: {e}"))
    });
    for m in employer.find_iter(text) {
        let i = word_at(ws, m.end());
        if i >= ws.len() || ws[i].start != m.end() {
            continue;
        }
        let mut j = i;
        while j < ws.len() && j - i < 4 {
            let w = &text[ws[j].start..ws[j].end];
            let joined = j == i || matches!(&text[ws[j - 1].end..ws[j].start], " " | " & ");
            if !joined || !matches!(shape(w), Shape::Cap | Shape::Upper) || is_vocabulary(w) {
                break;
            }
            j += 1;
        }
        if j > i {
            push(
                out,
                ws[i].start,
                ws[j - 1].end,
                Label::Organization,
                "employer",
                0.8,
            );
        }
    }
    // `Blue Shield of California`: an organisation `of` a capitalised name.
    let of_ext: Vec<Span> = out
        .iter()
        .filter(|s| s.label == Label::Organization && text[s.end..].starts_with(" of "))
        .filter_map(|s| {
            let i = word_at(ws, s.end + 4);
            let (_, e) = name_run(text, ws, i, false)?;
            (ws.get(i)?.start == s.end + 4).then(|| Span {
                end: e,
                ..s.clone()
            })
        })
        .collect();
    out.extend(of_ext);
    // `..., P.C.`, `..., Inc.` after an organisation.
    let extended: Vec<Span> = out
        .iter()
        .filter(|s| s.label == Label::Organization)
        .filter_map(|s| {
            let rest = &text[s.end..];
            ["P.C.", "PC", "P.A.", "LLC", "Inc.", "Inc", "PLLC", "LLP"]
                .iter()
                .find_map(|suffix| {
                    let tail = format!(", {suffix}");
                    rest.starts_with(&tail).then(|| Span {
                        end: s.end + tail.len(),
                        ..s.clone()
                    })
                })
        })
        .collect();
    out.extend(extended);
    // `St. Agnes`, `Saint Jude`, not a street.
    static SAINT: OnceLock<Regex> = OnceLock::new();
    let saint = SAINT.get_or_init(|| {
        Regex::new(
            r"\b(?:St\.?|ST\.?|Saint|SAINT)[ \t]+[A-Z][A-Za-z'’]+(?:'s|’s)?(?:[ \t]+[A-Z][a-z]+)?",
        )
        .unwrap_or_else(|e| panic!("saint: {e}"))
    });
    for m in saint.find_iter(text) {
        let after = lower[m.end()..].trim_start();
        let street = [
            "street", "st ", "st.", "ave", "road", "rd", "blvd", "lane", "drive",
        ]
        .iter()
        .any(|s| after.starts_with(s))
            || m.as_str().split_whitespace().last().is_some_and(|l| {
                ["Street", "Avenue", "Road", "Lane", "Drive", "Place", "Ave"].contains(&l)
            });
        if !street {
            push(out, m.start(), m.end(), Label::Organization, "saint", 0.8);
        }
    }
    // Acronyms introduced after an organisation: `... Hospital (MGH)`.
    let orgs: Vec<(usize, usize)> = out
        .iter()
        .filter(|s| s.label == Label::Organization)
        .map(|s| (s.start, s.end))
        .collect();
    let mut acronyms = HashSet::new();
    for (_, e) in orgs {
        let rest = &text[e..];
        let trimmed = rest.trim_start();
        if let Some(inner) = trimmed.strip_prefix('(') {
            let acr: String = inner
                .chars()
                .take_while(|c| c.is_ascii_uppercase())
                .collect();
            if (2..=6).contains(&acr.len()) && inner[acr.len()..].starts_with(')') {
                acronyms.insert(acr);
            }
        }
    }
    for w in ws {
        let t = &text[w.start..w.end];
        if acronyms.contains(t) {
            push(
                out,
                w.start,
                w.end,
                Label::Organization,
                "organization_acronym",
                0.85,
            );
        }
    }
}

fn places(text: &str, ws: &[Word], lex: &Lexicon, found: &[Span], out: &mut Vec<Span>) {
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
fn unlisted_places(text: &str, ws: &[Word], found: &[Span], out: &mut Vec<Span>) {
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
fn address_towns(text: &str, ws: &[Word], seeds: &[Span], out: &mut Vec<Span>) {
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
