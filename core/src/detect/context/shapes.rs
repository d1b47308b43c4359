//! Names the other layers leave in pieces, completed by their shape:
//!
//! - **initials a note defines** (`Marisol Kettering, RN (MK)`): the
//!   letters in parentheses are the name's initials, so every other
//!   `MK` of the note (a flowsheet's sign-off column, `placed ... by MK`)
//!   is that person;
//! - **initials inside or before a name** (`Rukmini S. Acharya`,
//!   `A. Vantongeren`, `Kh. Petrosyan`): a found name takes them;
//! - **inverted names** (`Wolf, Matthias J.`, `Patient: Oyelaran,
//!   Tobiloba`, `Oyelowo, T MD`): surname, comma, given name or initial.

use std::collections::HashSet;
use std::sync::OnceLock;

use regex::Regex;

use super::{push, Label, Lexicon, Span};
use crate::detect::vocab::{is_honorific, is_vocabulary};

/// Abbreviations with a point before a capitalised word that are not a
/// given name's initial (`St. Hedwig`, `Mt. Sinai`).
const NOT_INITIALS: &[&str] = &[
    "St", "Mt", "Ft", "Jr", "Sr", "No", "Pt", "Ste", "Rd", "Dept",
];

/// What may stand between a name and the initials it defines: a
/// credential or two (`, RN`, `, MD, PhD`), then `(`.
fn defined_after() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^(?:,?[ \t]*[A-Z][A-Za-z.]{1,9}){0,2}[ \t]*\((?P<i>[A-Z]{2,3})\)")
            .unwrap_or_else(|e| panic!("defined_after: {e}"))
    })
}

/// A staff member's user code in parentheses after their name and
/// credentials (`Carmen Ocasio, RN (user CO7)`, `Paloma Ruiz (PR-SCR-09)`):
/// letters and digits, or letter groups joined by dashes with a digit.
fn user_code_after() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^(?:,?[ \t]*[A-Z][A-Za-z.()]{1,9}){0,3}[ \t]*\((?:user[ \t]+)?(?P<c>[A-Z]{1,5}[0-9]{1,4}|[A-Z]{1,5}(?:-[A-Z0-9]{1,5}){1,3})\)")
            .unwrap_or_else(|e| panic!("user_code_after: {e}"))
    })
}

/// A field label that introduces a patient's name, written surname first.
fn patient_label() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)(?:^|[ \t])(?:patient(?:[ \t]+name)?|pt|name|re|subject)[ \t]*:[ \t]*$")
            .unwrap_or_else(|e| panic!("patient_label: {e}"))
    })
}

/// `Surname, I MD`: a prescriber in a medication list.
fn surname_initial_credential() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"\b(?P<n>[A-Z][a-z]+(?:[-'][A-Z][a-z]+)?,[ \t]?[A-Z])\.?[ \t]+(?:MD|DO|NP|PA|RN|DDS|DPM)\b")
            .unwrap_or_else(|e| panic!("surname_initial_credential: {e}"))
    })
}

/// The initials of `name`'s words (`Marisol Kettering` -> `MK`), and of
/// its first and last words alone when it has more.
fn initials_of(name: &str) -> Vec<String> {
    let ws: Vec<char> = name
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter_map(|w| w.chars().next())
        .filter(|c| c.is_uppercase())
        .collect();
    let mut out = vec![ws.iter().collect::<String>()];
    if ws.len() > 2 {
        out.push([ws[0], ws[ws.len() - 1]].iter().collect());
    }
    out
}

/// Whether `text[start..end]` is a whole token (no letter or digit
/// touches it).
fn whole(text: &str, start: usize, end: usize) -> bool {
    !text[..start]
        .chars()
        .next_back()
        .is_some_and(char::is_alphanumeric)
        && !text[end..]
            .chars()
            .next()
            .is_some_and(char::is_alphanumeric)
}

/// Completes the names of `seeds` and `out` (see the module docs), adding
/// spans to `out`.
pub(super) fn complete(text: &str, lex: &Lexicon, seeds: &[Span], out: &mut Vec<Span>) {
    let mut persons: Vec<(usize, usize)> = seeds
        .iter()
        .chain(out.iter())
        .filter(|s| s.label == Label::Person)
        .map(|s| (s.start, s.end))
        .collect();
    persons.sort_unstable();
    persons.dedup();
    let mut add: Vec<(usize, usize, &'static str)> = Vec::new();
    defined_initials(text, &persons, &mut add);
    for (i, &(s, e)) in persons.iter().enumerate() {
        // A name's leading initial: `A. Vantongeren`, `Kh. Petrosyan`.
        let before = &text[..s];
        if let Some(head) = before.strip_suffix(". ") {
            let letters = head.len() - head.trim_end_matches(|c: char| c.is_alphabetic()).len();
            let lead = &head[head.len() - letters..];
            if (1..=2).contains(&letters)
                && lead.starts_with(|c: char| c.is_uppercase())
                && !is_honorific(lead)
                && !NOT_INITIALS.contains(&lead)
                && whole(text, s - 2 - letters, s - 2)
            {
                add.push((s - 2 - letters, e, "name_initial"));
            }
        }
        // The next name that starts after this one ends (found names may
        // overlap); the last one may still be inverted.
        let next = persons[i + 1..].iter().find(|&&(ns, _)| ns >= e).copied();
        let Some((ns, ne)) = next else {
            inverted(text, lex, s, e, None, &mut add);
            continue;
        };
        let gap = &text[e..ns];
        // A middle initial between two parts: `Rukmini S. Acharya`.
        let g = gap.trim_matches([' ', '\t']);
        if gap.starts_with(' ')
            && gap.ends_with(' ')
            && g.len() <= 2
            && g.starts_with(|c: char| c.is_ascii_uppercase())
            && (g.len() == 1 || g.ends_with('.'))
        {
            add.push((s, ne, "name_middle_initial"));
        }
        inverted(text, lex, s, e, Some((ns, ne)), &mut add);
    }
    for c in surname_initial_credential().captures_iter(text) {
        if let Some(n) = c.name("n") {
            let surname = n.as_str().split(',').next().unwrap_or("");
            if !is_vocabulary(surname) {
                add.push((n.start(), n.end(), "name_inverted"));
            }
        }
    }
    for (s, e, name) in add {
        push(out, s, e, Label::Person, name, 0.8);
    }
    for &(_, e) in &persons {
        if let Some(c) = user_code_after()
            .captures(&text[e..])
            .and_then(|c| c.name("c"))
        {
            // `PGY-2` is a resident's year, not a code.
            if c.as_str().bytes().any(|b| b.is_ascii_digit()) && !c.as_str().starts_with("PGY") {
                push(out, e + c.start(), e + c.end(), Label::Id, "user_code", 0.8);
            }
        }
    }
}

/// Initials defined in parentheses after a name, and every other
/// occurrence of them as a whole token.
fn defined_initials(
    text: &str,
    persons: &[(usize, usize)],
    add: &mut Vec<(usize, usize, &'static str)>,
) {
    let mut defined: HashSet<&str> = HashSet::new();
    for &(s, e) in persons {
        let name = &text[s..e];
        if name.split_whitespace().count() < 2 {
            continue;
        }
        let Some(c) = defined_after().captures(&text[e..]) else {
            continue;
        };
        let Some(i) = c.name("i") else { continue };
        if initials_of(name).iter().any(|x| x == i.as_str()) {
            defined.insert(&text[e + i.start()..e + i.end()]);
        }
    }
    for d in defined {
        let mut at = 0;
        while let Some(p) = text[at..].find(d) {
            let (s, e) = (at + p, at + p + d.len());
            if whole(text, s, e) {
                add.push((s, e, "defined_initials"));
            }
            at = e;
        }
    }
}

/// A surname followed by a comma and a given name or initial: the next
/// found name (`Wolf, Matthias`), or, after a patient's field label, the
/// capitalised word after the comma (`Patient: Oyelaran, Tobiloba`); a
/// trailing initial joins (`Matthias J.`).
fn inverted(
    text: &str,
    lex: &Lexicon,
    s: usize,
    e: usize,
    next: Option<(usize, usize)>,
    add: &mut Vec<(usize, usize, &'static str)>,
) {
    let rest = &text[e..];
    let Some(after_comma) = rest.strip_prefix(", ").or_else(|| rest.strip_prefix(',')) else {
        return;
    };
    let given_start = e + (rest.len() - after_comma.len());
    let line_start = text[..s].rfind('\n').map_or(0, |i| i + 1);
    let labelled = patient_label().is_match(&text[line_start..s]);
    // A surname is one word (`Wolf`, `Faraday-Kwon`); two words and a
    // comma are as often a name and what follows it (`Sunniva Halloran,
    // Tillbrook Family Medicine`).
    let one_word = !text[s..e].contains([' ', '\t']);
    let end = match next {
        Some((ns, ne)) if ns == given_start && (one_word || labelled) => ne,
        _ => {
            if !labelled {
                return;
            }
            let word_len = after_comma
                .find(|c: char| !(c.is_alphabetic() || c == '-' || c == '\''))
                .unwrap_or(after_comma.len());
            let word = &after_comma[..word_len];
            if word.len() < 2
                || !word.starts_with(|c: char| c.is_uppercase())
                || is_vocabulary(word)
                || lex.is_clinical_word(word)
            {
                return;
            }
            given_start + word_len
        }
    };
    // A trailing middle initial: ` J.` or ` J` before a blank or the end.
    let tail = &text[end..];
    let b = tail.as_bytes();
    let extra = if b.len() >= 2
        && b[0] == b' '
        && b[1].is_ascii_uppercase()
        && b.get(2).is_none_or(|c| !c.is_ascii_alphanumeric())
    {
        if b.get(2) == Some(&b'.') {
            3
        } else {
            2
        }
    } else {
        0
    };
    add.push((s, end + extra, "name_inverted"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::Source;

    fn span(text: &str, word: &str) -> Span {
        let s = text
            .find(word)
            .unwrap_or_else(|| panic!("{word} in {text}"));
        Span {
            start: s,
            end: s + word.len(),
            label: Label::Person,
            score: 0.9,
            source: Source::Model,
        }
    }

    fn completed(text: &str, seeds: &[&str]) -> Vec<String> {
        let lex = Lexicon::default();
        let seeds: Vec<Span> = seeds.iter().map(|w| span(text, w)).collect();
        let mut out = Vec::new();
        complete(text, &lex, &seeds, &mut out);
        out.iter()
            .map(|s| text[s.start..s.end].to_string())
            .collect()
    }

    #[test]
    fn initials_a_note_defines_are_names_everywhere_in_it() {
        let text = "0000\t37.9\tMK\n0915 Assessed by MK. OK.\nMarisol Kettering, RN (MK)  RN-20774\nMKI level";
        let got = completed(text, &["Marisol Kettering"]);
        assert_eq!(got.iter().filter(|g| *g == "MK").count(), 3, "{got:?}");
        // Initials that are not the name's are not taken.
        let text = "Faith Lemaire, RN (ICU)\nICU bed 4";
        assert!(completed(text, &["Faith Lemaire"]).is_empty());
    }

    #[test]
    fn initials_and_inverted_names_join_the_name() {
        let got = completed("Rukmini S. Acharya, M.D.", &["Rukmini", "Acharya"]);
        assert!(got.contains(&"Rukmini S. Acharya".to_string()), "{got:?}");
        let got = completed("verified by A. Vantongeren (tech)", &["Vantongeren"]);
        assert!(got.contains(&"A. Vantongeren".to_string()), "{got:?}");
        let got = completed("reported by Kh. Petrosyan (MLS)", &["Petrosyan"]);
        assert!(got.contains(&"Kh. Petrosyan".to_string()), "{got:?}");
        let got = completed("RE: Wolf, Matthias J.     DOB", &["Wolf", "Matthias"]);
        assert!(got.contains(&"Wolf, Matthias J.".to_string()), "{got:?}");
        let got = completed("Patient: Oyelaran, Tobiloba (\"Tobi\")", &["Oyelaran"]);
        assert!(got.contains(&"Oyelaran, Tobiloba".to_string()), "{got:?}");
        let got = completed("Mail Rx  Oyelowo, T MD (urology)", &[]);
        assert!(got.contains(&"Oyelowo, T".to_string()), "{got:?}");
    }

    #[test]
    fn user_codes_after_a_name_are_ids() {
        let lex = Lexicon::default();
        for (text, name, code) in [
            (
                "Taken by: Carmen Ocasio, RN (user CO7)",
                "Carmen Ocasio",
                "CO7",
            ),
            (
                "Scribe: Paloma Ruiz (PR-SCR-09)",
                "Paloma Ruiz",
                "PR-SCR-09",
            ),
            (
                "Mercy Adjei-Hill, RN, TCRN (MAH7)   12/20",
                "Mercy Adjei-Hill",
                "MAH7",
            ),
        ] {
            let mut out = Vec::new();
            complete(text, &lex, &[span(text, name)], &mut out);
            assert!(
                out.iter()
                    .any(|s| s.label == Label::Id && &text[s.start..s.end] == code),
                "{text}: {out:?}"
            );
        }
        // Initials without a digit are the name's, not a code.
        let text = "Faith Lemaire, RN (FL)";
        let mut out = Vec::new();
        complete(text, &lex, &[span(text, "Faith Lemaire")], &mut out);
        assert!(out.iter().all(|s| s.label != Label::Id), "{out:?}");
    }

    #[test]
    fn commas_and_capitals_elsewhere_stay_as_they_are() {
        // Not after a patient's label: a list of a name and a word.
        assert!(completed("Seen by Smith, Cardiology today", &["Smith"]).is_empty());
        // A sentence's capital after a name is not an initial.
        assert!(completed("Called Jones. A plan was made", &["Jones"]).is_empty());
        // Abbreviations and titles before a name are not initials.
        assert!(completed("at St. Hedwig Parish", &["Hedwig Parish"]).is_empty());
        assert!(completed("seen by Dr. Marchand", &["Marchand"]).is_empty());
        // A two-word name and a comma: what follows is not a given name.
        assert!(completed(
            "Sunniva Halloran, Tillbrook Family",
            &["Sunniva Halloran", "Tillbrook"]
        )
        .is_empty());
        // After a patient's label, a common word is not a given name.
        assert!(completed("Patient: Lopez, Abdomen", &["Lopez"]).is_empty());
    }
}
