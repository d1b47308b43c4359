//! Names from the words around them: a title or a field label before them,
//! a credential after them, a relative before them, a first name followed
//! by a census surname, dictation and typist codes.

use std::sync::OnceLock;

use regex::Regex;

use crate::detect::lexicon::Lexicon;
use crate::detect::vocab::{is_common, is_honorific, is_name_word, is_vocabulary};
use crate::detect::{Label, Span};

use super::{is_credential, name_run, name_run_with, push, shape, word_at, Shape, Word};

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
pub(super) fn typist() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?m)^[ \t]*(?:-{1,2}[ \t]*)?([A-Za-z]{2,4}|[A-Za-z][a-z]{2,14})[ \t]*[:/][ \t]*([A-Za-z]{2,15})(?:[ \t]*/[ \t]*([A-Za-z]{2,15}))?(?:[ \t]*/[ \t]*([A-Za-z]{2,15}))?[ \t]*$|(?m)^[ \t]*([A-Z]{2,4})/([a-z]{2,4})(?:[ \t]{2,}|[ \t]*$)")
            .unwrap_or_else(|e| panic!("typist: {e}"))
    })
}

/// Initials where a signer's go: `by ACT`, `/mb` at a line's end, the last
/// cell of a table row (`| KL`), `Transcribed: PR`, a lone `cw` after a
/// sentence at the end of a line.
pub(super) fn initials() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?m)by[ \t]+(?P<a>[A-Z]{2,4})\b|[ \t]/(?P<b>[a-z]{2,3})[ \t]*$|^/(?P<c>[a-z]{2,3})[ \t]*$|\|[ \t]*(?P<d>[A-Z]{2,3})[ \t]*$|(?i:initials|init|transcribed|typed|typist|signed|verified|reviewed|entered)[ \t]*:[ \t]*(?P<e>[A-Za-z]{2,4})[ \t]*$|[.)][ \t]+(?P<f>[a-z]{2,3})[ \t]*$|[-–][ \t]*(?P<g>[A-Z]{2,3})[ \t]*$")
            .unwrap_or_else(|e| panic!("initials: {e}"))
    })
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

pub(super) fn names(text: &str, ws: &[Word], lex: &Lexicon, out: &mut Vec<Span>) {
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
