//! Clock times written as four digits (`0214`, `1900`): the form of
//! flowsheets, medication administration records, triage notes and
//! dictation headers. A four-digit number is a time only in context:
//!
//! - a date right before it (`10/22/2021 0214`, `7/19 0930`,
//!   `4-Jan-2024  1118`);
//! - a word that introduces a time before it (`at 0222`, `@ 0700`,
//!   `approx 0100`, `Time: 1645`, `placed ... 0205`, `RN 0705`) or one
//!   that follows a time after it (`1900 hrs`, `1530 today`);
//! - a range or list of such numbers (`0930-1040`, `0400/1200/2000`,
//!   `0900 2100` after a frequency such as `BID`);
//! - the start of a flowsheet row (`0215  BP 88/48`, `0000<TAB>37.9`).
//!
//! A number that reads as a year (1900 to 2059) needs the strong context:
//! a date before it, a time word such as `at`, a time word after it, or a
//! row among rows that start with times; `since 2019` and `in 2020` stay
//! years (a bare year is not an identifier). A number followed by a unit
//! (`1200 mL`, `2000 IU`) or inside a larger number (`1,200`, `1200.5`,
//! `2019-06`) is never a time.

use std::sync::OnceLock;

use regex::Regex;

use super::{Label, Source, Span};

/// Words before a number that make it a time, even one that reads as a
/// year.
const STRONG_BEFORE: &[&str] = &[
    "at",
    "@",
    "time",
    "times",
    "seen",
    "printed",
    "arrival",
    "arrived",
    "lkw",
    "well",
    "start",
    "started",
    "stop",
    "stopped",
    "completed",
    "given",
    "drawn",
    "obtained",
    "placed",
    "ordered",
    "removed",
    "collected",
    "received",
    "reported",
    "called",
    "paged",
    "notified",
    "administered",
    "dose",
    "signed",
    "rn",
    "md",
    "np",
    "lpn",
    "today",
    "tonight",
    "assessment",
    "reassessment",
    "handoff",
    "poc",
    "exposure",
    "intake",
    "weaned",
    "bolus",
    "abg",
    "vbg",
    "vitals",
    "onset",
    "woke",
    "awoke",
];

/// Words before a number that make it a time when it cannot be a year
/// (`since 0700`, but `since 2019`), frequencies among them (`BID 0900`).
const WEAK_BEFORE: &[&str] = &[
    "since",
    "until",
    "till",
    "by",
    "before",
    "after",
    "between",
    "~",
    "approx",
    "approximately",
    "around",
    "about",
    "due",
    "daily",
    "bid",
    "tid",
    "qid",
    "qhs",
    "qam",
    "qpm",
    "qd",
    "qday",
    "nightly",
    "iv",
    "po",
    "sq",
    "sc",
    "im",
    "pr",
    "clear",
    "out",
    "thru",
    "through",
];

/// Words after a number that make it a time, even one that reads as a
/// year.
const STRONG_AFTER: &[&str] = &[
    "hrs",
    "hr",
    "h",
    "hours",
    "hour",
    "today",
    "tonight",
    "yesterday",
    "overnight",
    "this",
    "last",
];

/// Words after a number that make it a quantity, never a time.
const UNITS_AFTER: &[&str] = &[
    "ml",
    "cc",
    "l",
    "mg",
    "mcg",
    "g",
    "gm",
    "gram",
    "grams",
    "kg",
    "lb",
    "lbs",
    "units",
    "unit",
    "u",
    "iu",
    "kcal",
    "cal",
    "calories",
    "ft",
    "feet",
    "m",
    "meters",
    "km",
    "mi",
    "miles",
    "steps",
    "meq",
    "mmol",
    "mosm",
    "ng",
    "pg",
    "cells",
    "k",
    "copies",
    "dollars",
    "usd",
    "patients",
    "pts",
    "people",
    "times",
    "x",
    "mm",
    "cm",
    "beds",
    "rpm",
    "hz",
    "sec",
    "s",
    "min",
    "mins",
    "minutes",
    "words",
    "mosm/kg",
    "ml/hr",
    "ml/h",
    "mg/dl",
    "mcg/kg/min",
    "cells/ul",
    "per",
    "%",
];

/// A four-digit candidate in the text.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    start: usize,
    end: usize,
    year_like: bool,
    accepted: bool,
}

fn digits() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // A constant pattern, tested below.
    RE.get_or_init(|| {
        Regex::new(r"\b(?:[01][0-9]|2[0-3])[0-5][0-9]\b").unwrap_or_else(|e| panic!("{e}"))
    })
}

/// A date right before a time: `10/22/2021 `, `7/19 `, `2024-01-04 `,
/// `4-Jan-2024  `, `Jan 4 `, `on 12/4 at `.
fn date_before() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?i)(?:\b[0-9]{1,2}/[0-9]{1,2}(?:/[0-9]{2,4})?|\b[0-9]{4}-[0-9]{2}-[0-9]{2}|\b[0-9]{1,2}-[a-z]{3}-[0-9]{2,4}|\b[0-9]{1,2}[a-z]{3}[0-9]{2,4}|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? [0-9]{1,2}(?:st|nd|rd|th)?(?:,? [0-9]{4})?)[ \t]+(?:at[ \t]+)?$",
        )
        .unwrap_or_else(|e| panic!("{e}"))
    })
}

/// The lower-cased word right before `at` on its line (punctuation such as
/// `:` and `(` stripped), and whether only blanks separate it from `at`.
/// A dosing interval in hours (`q8h`, `q12h`, `q4hr`), a frequency like
/// `BID` before a list of administration times.
fn every_hours(word: &str) -> bool {
    word.strip_prefix('q')
        .map(|w| {
            w.trim_end_matches("hrs")
                .trim_end_matches("hr")
                .trim_end_matches('h')
        })
        .is_some_and(|n| !n.is_empty() && n.len() <= 2 && n.bytes().all(|b| b.is_ascii_digit()))
        && word.ends_with(['h', 'r', 's'])
}

fn word_before(text: &str, at: usize) -> String {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let before = text[line_start..at].trim_end_matches([' ', '\t', ':', '(', ',']);
    let word = before
        .rsplit([' ', '\t', '('])
        .next()
        .unwrap_or("")
        .trim_end_matches(['.', ':', ','])
        .to_lowercase();
    word
}

/// The lower-cased word right after `at` on its line, and the character
/// that follows the number directly.
fn word_after(text: &str, at: usize) -> String {
    let rest = &text[at..];
    let line = rest.split('\n').next().unwrap_or("");
    let line = line.strip_prefix(' ').unwrap_or(line);
    line.split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == ')')
        .next()
        .unwrap_or("")
        .trim_end_matches(['.', ':'])
        .to_lowercase()
}

/// Whether the number is glued to a larger number or code: `1,200`,
/// `1200.5`, `#1200`, `$2000`, `2019-06`, `A1200`.
fn glued(text: &str, start: usize, end: usize) -> bool {
    let prev = text[..start].chars().next_back();
    let next = text[end..].chars().next();
    let after_next = text[end..].chars().nth(1);
    let prev_bad = prev.is_some_and(|c| matches!(c, '.' | ',' | '$' | '#' | '+' | ':' | '\''));
    let next_bad = match next {
        Some('.' | ',' | ':') => after_next.is_some_and(|c| c.is_ascii_digit()),
        Some('%' | '\'') => true,
        _ => false,
    };
    // A slash or dash joins it to another number: only another four-digit
    // one makes a range or list of times (`0400/1200`, `0930-1040`), any
    // other a date or a code (`10/22/2021`, `2019-06`).
    let four = |s: &str| s.len() == 4 && s.bytes().all(|b| b.is_ascii_digit());
    let prev_joined = matches!(prev, Some('/' | '-')) && {
        let head = &text[..start - 1];
        let run = head.len() - head.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        run > 0 && !four(&head[head.len() - run..])
    };
    let next_joined = matches!(next, Some('/' | '-')) && {
        let tail = &text[end + 1..];
        let run = tail.len() - tail.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        run > 0 && !four(&tail[..run])
    };
    prev_bad || next_bad || prev_joined || next_joined
}

/// Whether `start` begins a flowsheet row: only blanks (or a bullet)
/// before it on its line, and a tab, two blanks or a word after it.
fn row_start(text: &str, start: usize, end: usize) -> bool {
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let lead = text[line_start..start].trim_matches([' ', '\t']);
    if !(lead.is_empty() || lead == "-" || lead == "*" || lead == "•") {
        return false;
    }
    let rest = &text[end..];
    rest.starts_with('\t')
        || rest.starts_with("  ")
        || rest.starts_with(": ")
        || (rest.starts_with(' ') && rest[1..].starts_with(|c: char| c.is_alphabetic() || c == '-'))
}

/// Every four-digit clock time in `text`, labelled `DATE`.
pub fn find(text: &str) -> Vec<Span> {
    let mut cands: Vec<Candidate> = Vec::new();
    for m in digits().find_iter(text) {
        if glued(text, m.start(), m.end()) {
            continue;
        }
        let after = word_after(text, m.end());
        if UNITS_AFTER.contains(&after.as_str()) {
            continue;
        }
        let v: u32 = m.as_str().parse().unwrap_or(0);
        cands.push(Candidate {
            start: m.start(),
            end: m.end(),
            year_like: (1900..=2059).contains(&v),
            accepted: false,
        });
    }
    let mut rows = vec![false; cands.len()];
    for (i, c) in cands.iter_mut().enumerate() {
        let before = word_before(text, c.start);
        let after = word_after(text, c.end);
        let line_start = text[..c.start].rfind('\n').map_or(0, |i| i + 1);
        let strong = date_before().is_match(&text[line_start..c.start])
            || STRONG_BEFORE.contains(&before.as_str())
            || STRONG_AFTER.contains(&after.as_str());
        // `Time in: 0910`, `Time out: 1005`.
        let time_in = matches!(before.as_str(), "in" | "out" | "on" | "off")
            && text[line_start..c.start]
                .to_lowercase()
                .trim_end_matches([' ', '\t', ':'])
                .rsplit([' ', '\t'])
                .nth(1)
                == Some("time");
        let weak = WEAK_BEFORE.contains(&before.as_str()) || every_hours(&before) || time_in;
        rows[i] = row_start(text, c.start, c.end);
        c.accepted = strong || (!c.year_like && (weak || rows[i]));
    }
    // A year-like row start among rows that start with times
    // (`2000<TAB>37.1` in a flowsheet of 0000, 0200, 0400 ...).
    let line_of = |at: usize| text[..at].matches('\n').count();
    let row_lines: Vec<(usize, bool)> = cands
        .iter()
        .zip(&rows)
        .filter(|(_, &r)| r)
        .map(|(c, _)| (line_of(c.start), c.accepted))
        .collect();
    for (i, c) in cands.iter_mut().enumerate() {
        if rows[i] && !c.accepted {
            let l = line_of(c.start);
            c.accepted = row_lines
                .iter()
                .any(|&(o, ok)| ok && o != l && o.abs_diff(l) <= 2);
        }
    }
    // A range of two numbers that are not both years is a range of times
    // (`(0700-0700)`, an intake period, `1900-0700`, a night shift), and so is a list of three or more
    // joined by slashes (`0400/1200/2000`; two are as often volumes, `I/O
    // 1450/1900`).
    let joined_by = |a: &Candidate, b: &Candidate, sep: &str| &text[a.end..b.start] == sep;
    for i in 1..cands.len() {
        let (a, b) = (cands[i - 1], cands[i]);
        if joined_by(&a, &b, "-") && !(a.year_like && b.year_like) {
            cands[i - 1].accepted = true;
            cands[i].accepted = true;
        }
    }
    let mut i = 0;
    while i < cands.len() {
        let mut j = i;
        while j + 1 < cands.len() && joined_by(&cands[j], &cands[j + 1], "/") {
            j += 1;
        }
        if j - i >= 2 && cands[i..=j].iter().any(|c| !c.year_like) {
            for c in &mut cands[i..=j] {
                c.accepted = true;
            }
        }
        i = j + 1;
    }
    // Ranges and lists: a neighbour of an accepted time on its line,
    // separated by blanks, commas, a slash, a dash or an arrow, is a time
    // too (`0930-1040`, `0400/1200/2000`, `0900 2100`), unless both read
    // as years joined by a dash (`1990-2010`).
    loop {
        let mut changed = false;
        for i in 0..cands.len() {
            for j in [i.wrapping_sub(1), i + 1] {
                let Some(&n) = cands.get(j) else { continue };
                let c = cands[i];
                if !n.accepted || c.accepted {
                    continue;
                }
                let (a, b) = if j < i { (n, c) } else { (c, n) };
                let gap = &text[a.end..b.start];
                let joined = !gap.is_empty()
                    && gap.len() <= 12
                    && gap
                        .chars()
                        .all(|ch| matches!(ch, ' ' | '\t' | ',' | '/' | '-' | '>' | '–'));
                let years = gap.contains('-') && a.year_like && b.year_like;
                if joined && !years {
                    cands[i].accepted = true;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    cands
        .into_iter()
        .filter(|c| c.accepted)
        .map(|c| Span {
            start: c.start,
            end: c.end,
            label: Label::Date,
            score: 0.8,
            source: Source::Rule("time_military"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(text: &str) -> Vec<&str> {
        find(text).iter().map(|s| &text[s.start..s.end]).collect()
    }

    #[test]
    fn times_in_context_are_found() {
        for (text, want) in [
            ("Arrival: 10/22/2021 0214    Mode: EMS", vec!["0214"]),
            ("Fall approx 0100, found on floor", vec!["0100"]),
            ("COLLECTED: 05JUL25 1410", vec!["1410"]),
            (
                "NPO since 2200 (solids), 0500 clear; POC 0640",
                vec!["2200", "0640"],
            ),
            (
                "Foley out 0900; chest film today 0122",
                vec!["0900", "0122"],
            ),
            (
                "EKG at 0222: AF; shown to the attending at 0224",
                vec!["0222", "0224"],
            ),
            ("last dose 2000 last night", vec!["2000"]),
            ("extubated (7/19 0930); now HFNC", vec!["0930"]),
            ("Seen 0930-1040", vec!["0930", "1040"]),
            (
                "meropenem 1 g IV 0400/1200/2000; heparin",
                vec!["0400", "1200", "2000"],
            ),
            ("INTAKE / OUTPUT (0700-0700)", vec!["0700", "0700"]),
            (
                "Memantine 10 mg PO BID    0900 2100  0900 RT",
                vec!["0900", "2100", "0900"],
            ),
            ("Time: 1645", vec!["1645"]),
            ("Time in: 0910\tTime out: 1005", vec!["0910", "1005"]),
            (
                "NURSING SHIFT NOTE   1900-0700   4 NORTH",
                vec!["1900", "0700"],
            ),
            ("Device check (1530 today)", vec!["1530"]),
            ("handoff at 1900 hrs", vec!["1900"]),
            ("Signed J. Wolfe, RN 0705", vec!["0705"]),
        ] {
            assert_eq!(times(text), want, "{text}");
        }
    }

    #[test]
    fn flowsheet_rows_start_with_times_year_like_ones_among_them() {
        let sheet =
            "0000\t37.9\t104\tMK\n0200\t38.4\t112\tMK\n1600\t36.9\t84\tFL\n2000\t37.1\t82\tDT\n";
        assert_eq!(times(sheet), vec!["0000", "0200", "1600", "2000"]);
        let log = "0215  BP 88/48, bolus started.\n0330  Lactate 2.6.\n";
        assert_eq!(times(log), vec!["0215", "0330"]);
    }

    #[test]
    fn years_quantities_and_codes_are_not_times() {
        for text in [
            "ESBL E. coli in 2020.",
            "dx since 2019, stable",
            "History:\n2015   Cholecystectomy\n2019   Appendectomy\n",
            "Intake 1200 mL, output 900 mL",
            "Vitamin D 2000 IU daily",
            "Cost $1200 per month; 1,200 steps; level 1200.5",
            "Job # 1234-5678",
            "dx 2019-06 on vedolizumab",
            "walked 1000 ft with PT",
            "Platelets 1500 K",
            "Room 1204, bed 2",
            "AF, dx ~2015; GI bleed",
            "5/2020 nl -> due 2030",
            "I/O 1450/1900",
            "Azathioprine 2019-2020: stopped",
        ] {
            assert!(times(text).is_empty(), "{text}: {:?}", times(text));
        }
    }
}
