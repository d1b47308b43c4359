//! Organisations: names ending in a facility word (`Hospital`, `Family
//! Medicine`), `St. Agnes`, known organisations, and acronyms introduced
//! in parentheses after one.

use std::collections::HashSet;
use std::sync::OnceLock;

use regex::Regex;

use crate::detect::vocab::{is_common, is_honorific, is_vocabulary};
use crate::detect::{Label, Span};

use super::words::{FACILITY, HOSPITAL_PREFIXES, KNOWN_ORGS, ORG_JOINERS};
use super::{is_credential, name_run, push, shape, word_at, Shape, Word};

pub(super) fn organisations(text: &str, ws: &[Word], out: &mut Vec<Span>) {
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
