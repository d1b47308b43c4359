//! The edges of spans found by any layer (the model, a context rule):
//! what a layer's span leaves out at its start or end and belongs to it,
//! an organisation's number, branch or ampersand tail, a person's glued or
//! trailing initial, a site's code before a record number.

use std::sync::OnceLock;

use regex::Regex;

use super::{is_common, shape, word_at, Shape, Word};

/// Where an organisation's name ending at `end` really ends: with a store
/// or union number after it (`Bayou Market Pharmacy #412`, `Shipfitters
/// Local 37`), or a branch after a dash (`VisionPlus Optometry -
/// Riverfront`, `Granite Ridge Primary Care - Elm St`) when the branch is
/// one or two capitalised words that are not common vocabulary and end
/// the phrase (a line end, punctuation or a column gap after them).
pub(super) fn organisation_tail(text: &str, ws: &[Word], end: usize) -> usize {
    static NUMBER: OnceLock<Regex> = OnceLock::new();
    let number = NUMBER.get_or_init(|| {
        Regex::new(r"^(?: #[ \t]?[0-9]{1,5}| (?i:local) [0-9]{1,5})\b")
            .unwrap_or_else(|e| panic!("organisation number: {e}"))
    });
    if let Some(m) = number.find(&text[end..]) {
        return end + m.end();
    }
    // A name that ends in `Local` or `Store` (a model's span often does)
    // takes its number.
    let tail = text.as_bytes()[..end]
        .rsplit(|&b| b == b' ')
        .next()
        .unwrap_or(&[]);
    if tail.eq_ignore_ascii_case(b"local") || tail.eq_ignore_ascii_case(b"store") {
        let digits = text[end..]
            .strip_prefix(' ')
            .map_or(0, |r| r.bytes().take_while(u8::is_ascii_digit).count());
        // (Only when digits follow: a span at the end of the text, or
        // before a multi-byte character, has no byte after a space.)
        if (1..=5).contains(&digits) {
            let after = text.as_bytes().get(end + 1 + digits);
            if !after.is_some_and(|c| c.is_ascii_alphanumeric()) {
                return end + 1 + digits;
            }
        }
    }
    // `Harmony Midwifery & OB`: one or two capitalised words after an
    // ampersand that end the phrase.
    if text[end..].starts_with(" & ") {
        let first = word_at(ws, end + 3);
        if first < ws.len() && ws[first].start == end + 3 {
            let cap = |i: usize| {
                matches!(
                    shape(&text[ws[i].start..ws[i].end]),
                    Shape::Cap | Shape::Upper
                )
            };
            let mut last = None;
            for i in first..(first + 2).min(ws.len()) {
                if i > first && &text[ws[i - 1].end..ws[i].start] != " " || !cap(i) {
                    break;
                }
                last = Some(i);
            }
            if let Some(l) = last.filter(|&l| closes(&text[ws[l].end..])) {
                return ws[l].end;
            }
        }
    }
    if !text[end..].starts_with(" - ") {
        return end;
    }
    let first = word_at(ws, end + 3);
    if first >= ws.len() || ws[first].start != end + 3 {
        return end;
    }
    const STREETS: &[&str] = &["St", "Ave", "Rd", "Blvd", "Dr", "Street", "Avenue", "Road"];
    const BRANCHES: &[&str] = &[
        "downtown",
        "uptown",
        "midtown",
        "riverfront",
        "waterfront",
        "northside",
        "southside",
        "eastside",
        "westside",
        "north",
        "south",
        "east",
        "west",
        "central",
        "main",
        "campus",
    ];
    let word = |i: usize| &text[ws[i].start..ws[i].end];
    let cap = |i: usize| matches!(shape(word(i)), Shape::Cap | Shape::Upper);
    let branch_word =
        |i: usize| !is_common(word(i)) || BRANCHES.contains(&word(i).to_lowercase().as_str());
    let next = first + 1;
    let joined = next < ws.len() && &text[ws[first].end..ws[next].start] == " ";
    let last = if !cap(first) {
        None
    } else if joined && STREETS.contains(&word(next)) {
        // `- Elm St`: a street, whatever its name.
        Some(next)
    } else if !branch_word(first) {
        None
    } else if joined && cap(next) && branch_word(next) {
        Some(next)
    } else {
        Some(first)
    };
    match last {
        Some(l) if closes(&text[ws[l].end..]) => ws[l].end,
        _ => end,
    }
}

/// Whether `after` (the text after a phrase) ends it: a line end,
/// punctuation or a column gap.
fn closes(after: &str) -> bool {
    after.is_empty()
        || after.starts_with(['\n', '\r', '\t', ',', ';', ')', '.'])
        || after.starts_with("  ")
}

/// Where a site code starts that stands right before an ID of six or more
/// digits (`GRMC 5590314`, `LVE 2047713`): two to five capitals after a
/// word boundary and before one space, which are not a label word (`MRN`,
/// `ID`, `FIN`...).
pub(super) fn site_code_before(text: &str, start: usize, end: usize) -> Option<usize> {
    const LABELS: &[&str] = &[
        "MRN", "MR", "ID", "NO", "NUM", "ACCT", "ACC", "FIN", "CSN", "HAR", "NPI", "DEA", "SSN",
        "DOB", "PT", "TEL", "FAX", "EXT", "UDI", "LOT", "REF", "SN", "CLIA", "MBI", "GRP", "PH",
        "PIN", "VIN", "ENC", "UNIT", "BED", "RM", "AND", "OR", "THE", "OF", "TO", "AT", "BY",
    ];
    let id = &text[start..end];
    // Digits, maybe grouped by dashes (`60-44-918`), six or more.
    let digits = id.bytes().filter(u8::is_ascii_digit).count();
    if digits < 6
        || !id.bytes().all(|b| b.is_ascii_digit() || b == b'-')
        || !id.starts_with(|c: char| c.is_ascii_digit())
    {
        return None;
    }
    let before = text[..start].strip_suffix(' ')?;
    let code_len = before
        .bytes()
        .rev()
        .take_while(u8::is_ascii_uppercase)
        .count();
    let code_start = before.len() - code_len;
    let boundary = before[..code_start]
        .bytes()
        .next_back()
        .is_none_or(|c| !c.is_ascii_alphanumeric());
    let code = &before[code_start..];
    ((2..=5).contains(&code_len) && boundary && !LABELS.contains(&code)).then_some(code_start)
}

/// Where a person's name from `start` to `end` really starts and ends: over
/// a capital initial and a dot glued before it (`C.Ortiz`), and over a
/// comma and a capital initial after it (`ROSENQUIST, H`, `Lopez, M.`),
/// but not `I` or `A` before a lower-case word (`Lopez, I think`).
pub(super) fn person_initials(text: &str, start: usize, end: usize) -> (usize, usize) {
    let b = text.as_bytes();
    let mut s = start;
    if start >= 2
        && b[start - 1] == b'.'
        && b[start - 2].is_ascii_uppercase()
        && (start == 2 || !b[start - 3].is_ascii_alphanumeric())
    {
        s = start - 2;
    }
    // Initials with a dot and a space before the name (`J. R. Lucero`,
    // where a layer found `R. Lucero`), two at most.
    for _ in 0..2 {
        if s >= 3
            && b[s - 1] == b' '
            && b[s - 2] == b'.'
            && b[s - 3].is_ascii_uppercase()
            && (s == 3 || !b[s - 4].is_ascii_alphanumeric() && b[s - 4] != b'.')
        {
            s -= 3;
        } else {
            break;
        }
    }
    // A surname before a comma that opens the field (`"Nakagawa, Ren"` in a
    // CSV export, `Lê, Hoàng Bảo`): a capitalised word, not vocabulary,
    // with a quote, tab, line start or column gap before it.
    if s == start {
        s = surname_before(text, start).unwrap_or(s);
    }
    let mut e = end;
    let rest = &b[end..];
    if rest.len() >= 3 && rest[0] == b',' && rest[1] == b' ' && rest[2].is_ascii_uppercase() {
        let after = &rest[3..];
        let dot = after.first() == Some(&b'.');
        let next = if dot { &after[1..] } else { after };
        let ends = next.first().is_none_or(|c| !c.is_ascii_alphanumeric());
        let pronoun = matches!(rest[2], b'I' | b'A')
            && next.len() >= 2
            && next[0] == b' '
            && next[1].is_ascii_lowercase();
        if ends && !pronoun {
            e = end + 3 + usize::from(dot);
        }
    }
    (s, e)
}

/// Where a surname starts that stands before `start` as `Surname, ` at
/// the start of a field ([`person_initials`]).
fn surname_before(text: &str, start: usize) -> Option<usize> {
    let before = text[..start].strip_suffix(", ")?;
    let word_start = before
        .char_indices()
        .rev()
        .take_while(|&(_, c)| c.is_alphabetic() || matches!(c, '-' | '\''))
        .last()
        .map(|(i, _)| i)?;
    let word = &before[word_start..];
    let opens = before[..word_start].is_empty()
        || before[..word_start].ends_with(['"', '\t', '\n', '('])
        || before[..word_start].ends_with("  ");
    (opens
        && word.chars().filter(|c| c.is_alphabetic()).count() >= 2
        && matches!(shape(word), Shape::Cap | Shape::Upper)
        && !is_common(word))
    .then_some(word_start)
}

/// Where an ID found from `start` really starts: over groups of capitals
/// joined to it by dashes (`TAB-` of `TAB-SH-0192`, `AUTH-` of
/// `AUTH-CB-25-0098812`, `PH-` of `PH-R-44102871`) and a `urn:oid:`
/// before an OID.
pub(super) fn id_prefix_before(text: &str, start: usize) -> Option<usize> {
    let mut s = start;
    if text[..s].ends_with("urn:oid:") {
        s -= "urn:oid:".len();
    }
    while let Some(before) = text[..s].strip_suffix('-') {
        let run = before
            .bytes()
            .rev()
            .take_while(u8::is_ascii_uppercase)
            .count();
        let head = before.len() - run;
        let boundary = before[..head]
            .bytes()
            .next_back()
            .is_none_or(|c| !c.is_ascii_alphanumeric() || c == b'-');
        if !(1..=6).contains(&run) || !boundary {
            break;
        }
        s = head;
    }
    (s < start).then_some(s)
}
