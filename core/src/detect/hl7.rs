//! HL7 v2 messages pasted into a note or exported by an interface engine:
//! names, addresses and facilities stand in fields whose place the
//! standard fixes (`PID-5` is the patient's name, `family^given^middle`),
//! in capitals and without the words around them that the other layers
//! read. The separators are read from each message's `MSH` segment
//! (`MSH|^~\&`: fields `|`, components `^`), so an export that renders
//! them otherwise (`MSH^~\&`) is read too.

use super::{Label, Source, Span};

/// What a field holds, by its data type.
#[derive(Clone, Copy)]
enum Kind {
    /// XPN: `family^given^middle^suffix^prefix`.
    Name,
    /// XCN: `id^family^given^middle^...`.
    Clinician,
    /// XAD: `street^other^city^state^zip^country`.
    Address,
    /// HD (a facility): `name^...`.
    Facility,
    /// PL (a patient's location): `unit^room^bed^facility`.
    Place,
}

/// The fields of the segments that hold names, addresses and facilities
/// (HL7 v2.5 numbering; `MSH` counted as the standard does, its field
/// separator being `MSH-1`).
const FIELDS: &[(&str, usize, Kind)] = &[
    ("MSH", 4, Kind::Facility),
    ("MSH", 6, Kind::Facility),
    ("EVN", 5, Kind::Clinician),
    ("PID", 5, Kind::Name),
    ("PID", 6, Kind::Name),
    ("PID", 9, Kind::Name),
    ("PID", 11, Kind::Address),
    ("PD1", 4, Kind::Clinician),
    ("NK1", 2, Kind::Name),
    ("NK1", 4, Kind::Address),
    ("NK1", 30, Kind::Name),
    ("PV1", 3, Kind::Place),
    ("PV1", 7, Kind::Clinician),
    ("PV1", 8, Kind::Clinician),
    ("PV1", 9, Kind::Clinician),
    ("PV1", 17, Kind::Clinician),
    ("PV1", 52, Kind::Clinician),
    ("ORC", 10, Kind::Clinician),
    ("ORC", 11, Kind::Clinician),
    ("ORC", 12, Kind::Clinician),
    ("ORC", 19, Kind::Clinician),
    ("OBR", 16, Kind::Clinician),
    ("OBR", 28, Kind::Clinician),
    ("OBX", 16, Kind::Clinician),
    ("OBX", 23, Kind::Facility),
    ("RXE", 13, Kind::Clinician),
    ("RXO", 14, Kind::Clinician),
    ("TXA", 5, Kind::Clinician),
    ("TXA", 9, Kind::Clinician),
    ("TXA", 22, Kind::Clinician),
    ("IN1", 4, Kind::Facility),
    ("IN1", 5, Kind::Address),
    ("IN1", 16, Kind::Name),
    ("IN1", 19, Kind::Address),
    ("GT1", 3, Kind::Name),
    ("GT1", 5, Kind::Address),
    ("AL1", 6, Kind::Clinician),
    ("SCH", 12, Kind::Clinician),
    ("AIP", 3, Kind::Clinician),
];

/// The spans of the HL7 segments in `text`.
pub(crate) fn find(text: &str) -> Vec<Span> {
    let mut out = Vec::new();
    let mut seps: Option<(char, char)> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let line = line.trim_end_matches(['\n', '\r']);
        if let Some(rest) = line.strip_prefix("MSH") {
            let mut cs = rest.chars();
            seps = match (cs.next(), cs.next()) {
                (Some(f), Some(c)) if !f.is_alphanumeric() && !c.is_alphanumeric() && f != c => {
                    Some((f, c))
                }
                _ => None,
            };
        }
        let Some((field_sep, comp_sep)) = seps else {
            continue;
        };
        segment(text, start, line, field_sep, comp_sep, &mut out);
    }
    out
}

/// The spans of one segment (`line`, at byte `start` of the text).
fn segment(text: &str, start: usize, line: &str, fs: char, cs: char, out: &mut Vec<Span>) {
    let Some(name) = line.get(..3) else {
        return;
    };
    if !line[3..].starts_with(fs) || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return;
    }
    // Byte ranges of the fields, numbered as the standard numbers them.
    let fields = split(line, fs, '\0');
    // Timestamps in any field (`MSH-7`, `PID-7`, `OBR-7`, ...):
    // `YYYYMMDD[HHMM[SS]]`, a component of digits alone.
    for &(a, b) in &fields[1..] {
        for (x, y) in split(&line[a..b], cs, '\0') {
            for (u, v) in split(&line[a + x..a + y], '~', cs) {
                let value = &line[a + x + u..a + x + v];
                if is_timestamp(value) {
                    out.push(Span {
                        start: start + a + x + u,
                        end: start + a + x + v,
                        label: Label::Date,
                        score: 0.99,
                        source: Source::Rule("hl7"),
                    });
                }
            }
        }
    }
    for &(seg, number, kind) in FIELDS.iter().filter(|f| f.0 == name) {
        // MSH-1 is the separator itself: MSH-n is split field n - 1.
        let index = if seg == "MSH" { number - 1 } else { number };
        let Some(&(a, b)) = fields.get(index) else {
            continue;
        };
        // A repeating field: `~` in the standard (the component separator
        // in an export that moved the separators along is not one).
        for (ra, rb) in split(&line[a..b], '~', cs) {
            let comps = split(&line[a + ra..a + rb], cs, '\0');
            let at = |i: usize| {
                comps
                    .get(i)
                    .map(|&(x, y)| (start + a + ra + x, start + a + ra + y))
            };
            let picks: &[(usize, Label)] = match kind {
                Kind::Name => &[(0, Label::Person), (1, Label::Person), (2, Label::Person)],
                Kind::Clinician => &[(1, Label::Person), (2, Label::Person), (3, Label::Person)],
                Kind::Address => &[
                    (0, Label::Location),
                    (1, Label::Location),
                    (2, Label::Location),
                    (4, Label::Location),
                ],
                Kind::Facility => &[(0, Label::Organization)],
                Kind::Place => &[(3, Label::Organization)],
            };
            for &(i, label) in picks {
                let Some((x, y)) = at(i) else {
                    continue;
                };
                let value = &text[x..y];
                if keep(value, label, kind) {
                    out.push(Span {
                        start: x,
                        end: y,
                        label,
                        score: 0.9,
                        source: Source::Rule("hl7"),
                    });
                }
            }
        }
    }
}

/// Whether `v` is an HL7 timestamp: 8, 12 or 14 digits that read as a
/// date from 1900 to 2099 and a valid clock time.
fn is_timestamp(v: &str) -> bool {
    if !matches!(v.len(), 8 | 12 | 14) || !v.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let n = |a: usize, b: usize| v[a..b].parse::<u32>().unwrap_or(u32::MAX);
    let date = (1900..=2099).contains(&n(0, 4))
        && (1..=12).contains(&n(4, 6))
        && (1..=31).contains(&n(6, 8));
    let time = v.len() < 12 || (n(8, 10) < 24 && n(10, 12) < 60);
    let secs = v.len() < 14 || n(12, 14) < 60;
    date && time && secs
}

/// Byte ranges of `s` split at `sep` (unless `sep` is `other`, the
/// separator of the level above).
fn split(s: &str, sep: char, other: char) -> Vec<(usize, usize)> {
    if sep == other {
        return vec![(0, s.len())];
    }
    let mut out = Vec::new();
    let mut from = 0;
    for (i, c) in s.char_indices() {
        if c == sep {
            out.push((from, i));
            from = i + c.len_utf8();
        }
    }
    out.push((from, s.len()));
    out
}

/// Whether a component's value is what its field says: a name of letters
/// (not a bare code of digits), an address part with a letter or a zip
/// code, a facility of two letters or more.
fn keep(value: &str, label: Label, kind: Kind) -> bool {
    let v = value.trim();
    if v.is_empty() || v.len() != value.len() {
        return false;
    }
    let letters = v.chars().filter(|c| c.is_alphabetic()).count();
    match label {
        Label::Person => {
            v.chars()
                .all(|c| c.is_alphabetic() || matches!(c, '-' | '\'' | ' ' | '.'))
                && letters >= 1
        }
        Label::Location => {
            matches!(kind, Kind::Address) && (letters >= 2 || v.bytes().all(|b| b.is_ascii_digit()))
        }
        _ => letters >= 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labelled(text: &str) -> Vec<(String, Label)> {
        find(text)
            .into_iter()
            .map(|s| (text[s.start..s.end].to_string(), s.label))
            .collect()
    }

    #[test]
    fn names_addresses_and_facilities_of_a_message() {
        let text = "MSH|^~\\&|EPIC|GRACE MED CTR|LAB|GMC LAB|20250612||ADT^A08|1|P|2.5\n\
                    PID|1||123456^^^GMC^MR||OKAFOR^CHIDI^A||19800101|M|||12 ELM ST^^SPRINGVALE^OH^44999||555-0101\n\
                    PV1|1|I|5W^512^A^GRACE MED CTR||||1234^NAKAMURA^REN^^^DR\n\
                    OBX|1|NM|GLU^Glucose||98|mg/dL\n";
        let got = labelled(text);
        for want in [
            ("GRACE MED CTR", Label::Organization),
            ("GMC LAB", Label::Organization),
            ("OKAFOR", Label::Person),
            ("CHIDI", Label::Person),
            ("A", Label::Person),
            ("12 ELM ST", Label::Location),
            ("SPRINGVALE", Label::Location),
            ("44999", Label::Location),
            ("NAKAMURA", Label::Person),
            ("REN", Label::Person),
        ] {
            assert!(
                got.contains(&(want.0.to_string(), want.1)),
                "{want:?} in {got:?}"
            );
        }
        // A test's code and name, units and message types are left alone.
        for word in ["GLU", "Glucose", "ADT", "A08", "EPIC", "mg/dL", "OH"] {
            assert!(!got.iter().any(|(t, _)| t == word), "{word} in {got:?}");
        }
    }

    #[test]
    fn separators_come_from_the_message_header() {
        let text = "MSH^~\\&^EPICADT^SCRMC^LABSYS^SCRMC-MICRO^20250612^^ADT~A08\n\
                    PID^1^^SCR-1~~~SCRMC~MR^^KOZLOWSKA-OBI~EWA~M^^19730219^F\n";
        let got = labelled(text);
        assert!(
            got.contains(&("KOZLOWSKA-OBI".to_string(), Label::Person)),
            "{got:?}"
        );
        assert!(got.contains(&("EWA".to_string(), Label::Person)), "{got:?}");
        assert!(
            got.contains(&("SCRMC".to_string(), Label::Organization)),
            "{got:?}"
        );
        // Text before any header, or a line that only looks like a segment.
        assert!(labelled("PID|1||x||DOE^JOHN\n").is_empty());
    }
}
