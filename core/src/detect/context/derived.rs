//! Identifiers made from the names a text names: a clinician's initials
//! (`LRM` of `Lourdes R. Montemayor`, `jdl` of `Jun de Leon`, `COF` of
//! `Cormac O'Dowd-Ferreira`) in a flowsheet's column, after a dictation
//! code's colon or at a line's end, and a user's login (`tnakashima`,
//! `nufot` of `Nkechi Ufot`, `tqpham` of `Tuan Q. Pham`, `marit.lindahl`,
//! `aowusuansah`) anywhere. Systems make them from the name, so a token
//! equal to one is that person, which neither a pattern nor the model can
//! tell from the token alone.

use std::collections::HashSet;

use unicode_normalization::UnicodeNormalization;

use super::{is_credential, words, Word};
use crate::detect::vocab::{is_honorific, is_vocabulary, STATE_CODES};
use crate::detect::{Label, Span};

/// Name words that are particles of a surname (`de`, `van der`): a system
/// may or may not give them a letter.
const PARTICLES: &[&str] = &[
    "de", "del", "della", "der", "den", "da", "das", "di", "do", "dos", "du", "la", "le", "van",
    "von", "bin", "binti", "ibn", "al", "el", "y", "st",
];

/// The initials and logins made from the person spans in `spans`, and
/// where the text holds them: spans of [`Label::Person`] for the tokens
/// equal to one (none that a span of `spans` already covers).
pub(super) fn find(text: &str, spans: &[&Span]) -> Vec<(usize, usize)> {
    let mut initials: HashSet<String> = HashSet::new();
    let mut logins: HashSet<String> = HashSet::new();
    for s in spans.iter().filter(|s| s.label == Label::Person) {
        let Some(name) = text.get(s.start..s.end) else {
            continue;
        };
        let parts = name_parts(name);
        add_initials(&parts, &mut initials);
        add_logins(&parts, &mut logins);
    }
    if initials.is_empty() && logins.is_empty() {
        return Vec::new();
    }
    let covered = |a: usize, b: usize| spans.iter().any(|s| s.start <= a && b <= s.end);
    let mut out = Vec::new();
    for (a, b) in tokens(text) {
        let t = &text[a..b];
        if covered(a, b) {
            continue;
        }
        let lower = t.to_lowercase();
        let letters = t.chars().all(char::is_alphabetic);
        let mut alpha = t.chars().filter(|c| c.is_alphabetic());
        let one_case = alpha.clone().all(char::is_lowercase) || alpha.all(char::is_uppercase);
        if !one_case {
            continue;
        }
        if logins.contains(&lower) && !is_vocabulary(t) {
            out.push((a, b));
            continue;
        }
        let n = t.chars().count();
        if letters
            && (2..=4).contains(&n)
            && initials.contains(&lower)
            && !is_vocabulary(t)
            && !is_credential(t)
            && !is_honorific(t)
            && !(n == 2 && state_code(text, a, b))
            && initials_position(text, a, b)
        {
            out.push((a, b));
        }
    }
    out
}

/// The words of a person's name in reading order (a `Last, First M`
/// form turned round), folded to ASCII lower case, credentials and
/// titles dropped; a hyphenated surname stays one word (`owusu-ansah`).
fn name_parts(name: &str) -> Vec<String> {
    let ordered: String = match name.split_once(',') {
        Some((last, first)) if !first.trim().is_empty() => format!("{first} {last}"),
        _ => name.to_string(),
    };
    words(&ordered)
        .iter()
        .map(|w: &Word| &ordered[w.start..w.end])
        .filter(|w| !is_credential(w) && !is_honorific(w))
        .map(fold)
        .filter(|w| !w.is_empty())
        .collect()
}

/// `w` in ASCII lower case: accents dropped (`Olguín`, `Zielińska`), the
/// letters NFD does not split mapped (`ł`, `ø`, `ß`), apostrophes dropped
/// (`O'Dowd`), hyphens kept.
fn fold(w: &str) -> String {
    let mut out = String::new();
    for c in w.nfd() {
        if unicode_normalization::char::is_combining_mark(c) {
            continue;
        }
        match c {
            'ł' | 'Ł' => out.push('l'),
            'ø' | 'Ø' => out.push('o'),
            'đ' | 'Đ' => out.push('d'),
            'ß' => out.push_str("ss"),
            'æ' | 'Æ' => out.push_str("ae"),
            'œ' | 'Œ' => out.push_str("oe"),
            '-' => out.push('-'),
            c if c.is_ascii_alphanumeric() => out.push(c.to_ascii_lowercase()),
            _ => {}
        }
    }
    out.trim_matches('-').to_string()
}

/// A name's initials as systems write them: one letter a word, or one a
/// hyphenated part (`Achterberg-Sy`: `a` or `as`), particles with or
/// without theirs; first and last alone too (`LM` of `Lourdes R.
/// Montemayor`). Only names of two words or more have initials.
fn add_initials(parts: &[String], out: &mut HashSet<String>) {
    if parts.len() < 2 {
        return;
    }
    for with_particles in [true, false] {
        for split_hyphens in [true, false] {
            let mut letters = String::new();
            for p in parts {
                if !with_particles && PARTICLES.contains(&p.as_str()) {
                    continue;
                }
                if split_hyphens {
                    letters.extend(p.split('-').filter_map(|h| h.chars().next()));
                } else {
                    letters.extend(p.chars().next());
                }
            }
            if (2..=4).contains(&letters.len()) {
                out.insert(letters.clone());
            }
        }
    }
    let (first, last) = (&parts[0], &parts[parts.len() - 1]);
    if let (Some(f), Some(l)) = (first.chars().next(), last.chars().next()) {
        out.insert(format!("{f}{l}"));
    }
}

/// A name's logins as systems make them: first initial (and middle
/// initials) and surname (`tnakashima`, `tqpham`), the surname's parts
/// joined (`aowusuansah`), cut to its first five letters or more
/// (`jkrzyz`), first and last with a dot (`marit.lindahl`). Surnames
/// shorter than three letters, and names of one word, make none.
fn add_logins(parts: &[String], out: &mut HashSet<String>) {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return;
    };
    let surname: String = last.chars().filter(char::is_ascii_alphanumeric).collect();
    if parts.len() == 1 || surname.len() < 3 || is_vocabulary(&surname) {
        return;
    }
    let Some(f) = first.chars().next() else {
        return;
    };
    let mut cuts = vec![surname.clone()];
    cuts.extend((5..surname.len()).map(|n| surname[..n].to_string()));
    let middles: String = parts[1..parts.len() - 1]
        .iter()
        .filter_map(|p| p.chars().next())
        .collect();
    for cut in &cuts {
        out.insert(format!("{f}{cut}"));
        if !middles.is_empty() {
            out.insert(format!("{f}{middles}{cut}"));
        }
    }
    let first_plain: String = first.chars().filter(char::is_ascii_alphanumeric).collect();
    if first_plain.len() >= 2 {
        out.insert(format!("{first_plain}.{surname}"));
        out.insert(format!("{first_plain}{surname}"));
        out.insert(format!("{first_plain}_{surname}"));
    }
}

/// Whether the two letters at `a..b` are a state's code where one
/// stands: after a town's comma or before a zip code.
fn state_code(text: &str, a: usize, b: usize) -> bool {
    let t = &text[a..b];
    let zip = text[b..]
        .strip_prefix(' ')
        .is_some_and(|r| r.len() >= 5 && r.as_bytes()[..5].iter().all(u8::is_ascii_digit));
    STATE_CODES.split('|').any(|c| c == t) && (text[..a].ends_with(", ") || zip)
}

/// Organisation words that systems leave out of an acronym, or keep.
const ACRONYM_JOINERS: &[&str] = &["of", "the", "and", "for", "at", "on", "de", "del", "la"];

/// The acronyms of the organisations in `spans` (`GMVMC` of `Green
/// Mountain Valley Medical Center`, `chuh` of `cedar hollow university
/// hospital`) and where the text holds them: spans of
/// [`Label::Organization`] for the tokens equal to one, three letters or
/// more, in the organisation's case, that are not vocabulary.
pub(super) fn acronyms(text: &str, spans: &[&Span]) -> Vec<(usize, usize)> {
    let mut upper: HashSet<String> = HashSet::new();
    let mut lower: HashSet<String> = HashSet::new();
    for s in spans.iter().filter(|s| s.label == Label::Organization) {
        let Some(name) = text.get(s.start..s.end) else {
            continue;
        };
        let parts: Vec<String> = words(name)
            .iter()
            .map(|w| fold(&name[w.start..w.end]))
            .filter(|w| !w.is_empty())
            .collect();
        let set = if name.chars().any(char::is_uppercase) {
            &mut upper
        } else {
            &mut lower
        };
        for with_joiners in [false, true] {
            let letters: String = parts
                .iter()
                .filter(|p| with_joiners || !ACRONYM_JOINERS.contains(&p.as_str()))
                .flat_map(|p| p.split('-').filter_map(|h| h.chars().next()))
                .collect();
            if (3..=6).contains(&letters.len()) {
                set.insert(letters);
            }
        }
    }
    let covered = |a: usize, b: usize| spans.iter().any(|s| s.start <= a && b <= s.end);
    words(text)
        .iter()
        .map(|w| (w.start, w.end))
        .filter(|&(a, b)| {
            let t = &text[a..b];
            let key = t.to_lowercase();
            let cased = (t.chars().all(char::is_uppercase) && upper.contains(&key))
                || (t.chars().all(char::is_lowercase) && lower.contains(&key));
            cased
                && t.chars().all(|c| c.is_ascii_alphabetic())
                && !covered(a, b)
                && !is_vocabulary(t)
                && !is_credential(t)
        })
        .collect()
}

/// Where initials stand for a person and not for a word: at a line's
/// end, in a column (a tab or two spaces before), around a dictation
/// code's colon or slash (`COF:ll`, `tqpham/gas`), in parentheses, or
/// after `by` or `initials`.
fn initials_position(text: &str, a: usize, b: usize) -> bool {
    let before = &text[..a];
    let after = &text[b..];
    let line_end = after
        .chars()
        .take_while(|&c| c != '\n')
        .all(|c| c.is_whitespace() || matches!(c, '.' | ')' | ']'))
        || after.starts_with("  ")
        || after.starts_with('\t');
    let column = before.ends_with('\t') || before.ends_with("  ");
    let code = before.ends_with([':', '/', '(']) || after.starts_with([':', '/', ')']);
    // A legend: `LRM = Lourdes R. Montemayor`.
    let legend = after.starts_with(" = ") || after.starts_with(" - ");
    let word_before = before
        .trim_end()
        .rsplit(|c: char| !c.is_alphabetic())
        .next()
        .unwrap_or("")
        .to_lowercase();
    let cue = matches!(
        word_before.as_str(),
        "by" | "initials" | "transcribed" | "typed" | "scribe" | "nurse" | "rn"
    );
    line_end || column || code || legend || cue
}

/// The text's tokens that may be a login or initials: letters, digits
/// and inner `.`, `_` or `-`, not part of an e-mail address or a URL.
fn tokens(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let inner = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-');
    let mut i = 0;
    while i < bytes.len() {
        let c = text[i..].chars().next().unwrap_or(' ');
        if !c.is_alphanumeric() {
            i += c.len_utf8();
            continue;
        }
        let start = i;
        let mut end = i;
        while end < bytes.len() {
            let d = text[end..].chars().next().unwrap_or(' ');
            if d.is_alphanumeric() || (d.is_ascii() && inner(d as u8)) {
                end += d.len_utf8();
            } else {
                break;
            }
        }
        let mut stop = end;
        while stop > start && matches!(bytes[stop - 1], b'.' | b'_' | b'-') {
            stop -= 1;
        }
        let glued = |at: Option<&u8>| at.is_some_and(|&c| matches!(c, b'@' | b'/' | b':'));
        let url = text[..start].ends_with("://") || text[..start].ends_with("www.");
        let email = bytes.get(end) == Some(&b'@') || (start > 0 && bytes[start - 1] == b'@');
        let path = glued(bytes.get(end)) && bytes.get(end + 1) == Some(&b'/');
        if !(email || url || path) {
            out.push((start, stop));
        }
        i = end.max(start + c.len_utf8());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::Source;

    fn person(text: &str, name: &str) -> Span {
        let start = text.find(name).unwrap_or(0);
        Span {
            start,
            end: start + name.len(),
            label: Label::Person,
            score: 0.9,
            source: Source::Rule("test"),
        }
    }

    fn found(text: &str, names: &[&str]) -> Vec<String> {
        let spans: Vec<Span> = names.iter().map(|n| person(text, n)).collect();
        let refs: Vec<&Span> = spans.iter().collect();
        find(text, &refs)
            .into_iter()
            .map(|(a, b)| text[a..b].to_string())
            .collect()
    }

    #[test]
    fn initials_in_a_column_and_after_a_code() {
        let text = "Signed: Lourdes R. Montemayor, RN\n0800\t37.1\t88\tLRM\n1200\t37.6\t94\tLRM\n";
        assert_eq!(found(text, &["Lourdes R. Montemayor"]), ["LRM", "LRM"]);
        let text = "Cormac O'Dowd-Ferreira, MD\nCOF:ll  D: 10/02/25";
        assert_eq!(found(text, &["Cormac O'Dowd-Ferreira"]), ["COF"]);
        let text = "Jun de Leon RN\n0800  ok  jdl\n";
        assert_eq!(found(text, &["Jun de Leon"]), ["jdl"]);
    }

    #[test]
    fn logins_of_the_names_found() {
        let text = "Printed by tnakashima. Attending: Tomoko Nakashima, MD";
        assert_eq!(found(text, &["Tomoko Nakashima"]), ["tnakashima"]);
        let text = "SPI: Nkechi Ufot, RN (nufot); Tuan Q. Pham -- tqpham";
        assert_eq!(
            found(text, &["Nkechi Ufot", "Tuan Q. Pham"]),
            ["nufot", "tqpham"]
        );
        let text = "RN: Ama Owusu-Ansah, RN    aowusuansah; cc marit.lindahl re Marit Lindahl";
        assert_eq!(
            found(text, &["Ama Owusu-Ansah", "Marit Lindahl"]),
            ["aowusuansah", "marit.lindahl"]
        );
        let text = "KOWALCZYK, AGNIESZKA B\nEVN^A08^^^AKOWALCZYK";
        assert_eq!(found(text, &["KOWALCZYK, AGNIESZKA B"]), ["AKOWALCZYK"]);
        let text = "katarzyna zielińska seen; dictated kzielinska";
        assert_eq!(found(text, &["katarzyna zielińska"]), ["kzielinska"]);
    }

    #[test]
    fn acronyms_of_the_organisations_found() {
        let text =
            "Admitted to Green Mountain Valley Medical Center. GMVMC pharmacy; at GMVMC since.";
        let start = text.find("Green").unwrap_or(0);
        let org = Span {
            start,
            end: start + "Green Mountain Valley Medical Center".len(),
            label: Label::Organization,
            score: 0.9,
            source: Source::Rule("test"),
        };
        let got: Vec<&str> = acronyms(text, &[&org])
            .into_iter()
            .map(|(a, b)| &text[a..b])
            .collect();
        assert_eq!(got, ["GMVMC", "GMVMC"]);
        // Lower case only where the name was written so.
        let text = "seen at cedar hollow university hospital; chuh clinic. CHUH";
        let start = text.find("cedar").unwrap_or(0);
        let org = Span {
            start,
            end: start + 32,
            ..org
        };
        let got: Vec<&str> = acronyms(text, &[&org])
            .into_iter()
            .map(|(a, b)| &text[a..b])
            .collect();
        assert_eq!(got, ["chuh"]);
    }

    #[test]
    fn words_states_and_credentials_are_not_initials() {
        // `MD` of Mary Dunn, `TN` of Tom Nash, `ED` of Ellen Dorsey.
        let text = "Mary Dunn\nSeen by MD\nTom Nash\nMemphis, TN\nEllen Dorsey\nto ED\n";
        assert!(found(text, &["Mary Dunn", "Tom Nash", "Ellen Dorsey"]).is_empty());
        // Initials inside a sentence are left alone.
        let text = "Cara Quinn reviewed. The CQ level was sent.";
        assert!(found(text, &["Cara Quinn"]).is_empty());
        // An e-mail address is a contact, not a login.
        let text = "Tomoko Nakashima: tnakashima@clinic.example";
        assert!(found(text, &["Tomoko Nakashima"]).is_empty());
    }
}
