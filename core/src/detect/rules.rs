//! Rule recognizers: what a token classifier misses or a pattern does
//! better, each with its checks (Luhn for cards, mod 97 for IBANs, range
//! checks for SSNs and dates).

use std::sync::OnceLock;

use regex::Regex;

use super::{Label, Source, Span};

struct Rule {
    label: Label,
    name: &'static str,
    re: Regex,
    check: fn(&str) -> bool,
    score: f32,
}

const MONTHS: &str = "(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|Jun(?:e)?|Jul(?:y)?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)";

fn always(_: &str) -> bool {
    true
}

fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        let r = |label, name, pattern: &str, check: fn(&str) -> bool, score| Rule {
            label,
            name,
            // The patterns are constants of this file, tested below.
            re: Regex::new(pattern).unwrap_or_else(|e| panic!("rule {name}: {e}")),
            check,
            score,
        };
        vec![
            r(Label::Contact, "email", r"(?i)\b[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}\b", always, 0.99),
            r(Label::Contact, "url", r"(?i)\b(?:https?://|www\.)[^\s<>()]+[^\s<>().,;:!?]", always, 0.95),
            r(Label::Contact, "ipv4", r"\b(?:(?:25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\b", always, 0.9),
            r(Label::Contact, "ipv6", r"(?i)\b(?:[0-9a-f]{1,4}:){7}[0-9a-f]{1,4}\b|(?i)\b(?:[0-9a-f]{1,4}:){1,7}:(?:[0-9a-f]{1,4}(?::[0-9a-f]{1,4}){0,6})?", ipv6_ok, 0.85),
            r(Label::Contact, "phone", r"(?:\+[0-9]{1,3}[ .-]?)?(?:\([0-9]{2,4}\)[ .-]?|\b[0-9]{2,4}[ .-])[0-9]{3,4}[ .-][0-9]{3,4}\b", phone_ok, 0.85),
            r(Label::Id, "credit_card", r"\b[0-9](?:[ -]?[0-9]){12,18}\b", luhn, 0.95),
            r(Label::Id, "us_ssn", r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b", ssn_ok, 0.9),
            r(Label::Id, "iban", r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b", iban_ok, 0.95),
            r(Label::Id, "mrn", r"(?i)\b(?:MRN[-:# ]*[0-9]{5,10}|medical record (?:number|no\.?)[:# ]*[0-9]{5,10})\b", always, 0.95),
            r(Label::Date, "date_numeric", r"\b(?:[0-9]{1,2}[/.-][0-9]{1,2}[/.-](?:[0-9]{4}|[0-9]{2})|[0-9]{4}-[0-9]{2}-[0-9]{2})\b", date_ok, 0.9),
            r(Label::Date, "date_written", &format!(r"\b(?:{MONTHS}\.? [0-9]{{1,2}}(?:st|nd|rd|th)?(?:,? [0-9]{{4}})?|[0-9]{{1,2}}(?:st|nd|rd|th)? (?:of )?{MONTHS}\.?(?:,? [0-9]{{4}})?|{MONTHS} [0-9]{{4}})\b"), always, 0.9),
            r(Label::Date, "time", r"(?i)\b(?:[01]?[0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9])?(?:\s?[ap]\.?m\.?)?\b", always, 0.8),
            r(Label::Age, "age_over_89", r"(?i)\b(?:(?:9[0-9]|1[0-4][0-9])[- ](?:years?|yrs?)[- ]old|age[d:]? (?:9[0-9]|1[0-4][0-9]))\b", always, 0.9),
            r(Label::Organization, "organization", r"\b(?:St\. )?(?:[A-Z][a-zA-Z'&.-]+ ){1,5}(?:(?:Inc|Corp|Ltd)\b\.?|(?:Hospital|Clinic|University|Medical Center|Medical Centre|Health Center|Corporation|LLC|Bank|Institute|Foundation)\b)", always, 0.85),
        ]
    })
}

/// Every rule match in `text` (possibly overlapping each other).
pub fn find(text: &str) -> Vec<Span> {
    let mut out = Vec::new();
    for rule in rules() {
        for m in rule.re.find_iter(text) {
            if (rule.check)(m.as_str()) {
                out.push(Span {
                    start: m.start(),
                    end: m.end(),
                    label: rule.label,
                    score: rule.score,
                    source: Source::Rule(rule.name),
                });
            }
        }
    }
    out
}

fn digits(s: &str) -> Vec<u32> {
    s.chars().filter_map(|c| c.to_digit(10)).collect()
}

/// Luhn checksum (credit cards).
pub fn luhn(s: &str) -> bool {
    let d = digits(s);
    if !(13..=19).contains(&d.len()) {
        return false;
    }
    let sum: u32 = d
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &x)| {
            if i % 2 == 1 {
                if x * 2 > 9 {
                    x * 2 - 9
                } else {
                    x * 2
                }
            } else {
                x
            }
        })
        .sum();
    sum % 10 == 0
}

/// US SSNs never start with 000, 666 or 9, nor have 00 or 0000 groups.
fn ssn_ok(s: &str) -> bool {
    let p: Vec<&str> = s.split('-').collect();
    p.len() == 3
        && p[0] != "000"
        && p[0] != "666"
        && !p[0].starts_with('9')
        && p[1] != "00"
        && p[2] != "0000"
}

/// IBAN mod-97 check.
pub fn iban_ok(s: &str) -> bool {
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if !compact.is_ascii() {
        return false;
    }
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    let (head, tail) = compact.split_at(4);
    let mut rem: u64 = 0;
    for c in tail.chars().chain(head.chars()) {
        let v = match c.to_digit(36) {
            Some(v) => v as u64,
            None => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

fn phone_ok(s: &str) -> bool {
    let n = digits(s).len();
    (7..=15).contains(&n)
}

fn ipv6_ok(s: &str) -> bool {
    s.contains("::") || s.matches(':').count() == 7
}

/// Numeric dates with a plausible day and month (either order).
fn date_ok(s: &str) -> bool {
    let parts: Vec<u32> = s
        .split(['/', '.', '-'])
        .filter_map(|p| p.parse().ok())
        .collect();
    match parts[..] {
        [y, m, d] if y >= 1000 => (1..=12).contains(&m) && (1..=31).contains(&d),
        [a, b, _] => {
            ((1..=12).contains(&a) && (1..=31).contains(&b))
                || ((1..=31).contains(&a) && (1..=12).contains(&b))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(&'static str, String)> {
        find(text)
            .into_iter()
            .map(|s| match s.source {
                Source::Rule(n) => (n, text[s.start..s.end].to_string()),
                Source::Model => ("model", String::new()),
            })
            .collect()
    }

    fn has(text: &str, rule: &str, value: &str) -> bool {
        found(text).iter().any(|(r, v)| *r == rule && v == value)
    }

    #[test]
    fn contacts() {
        assert!(has(
            "mail jane.doe+x@mail.example.org now",
            "email",
            "jane.doe+x@mail.example.org"
        ));
        assert!(has(
            "see https://example.org/a?b=1.",
            "url",
            "https://example.org/a?b=1"
        ));
        assert!(has("host 192.168.10.1 down", "ipv4", "192.168.10.1"));
        assert!(!has("version 999.1.1.1", "ipv4", "999.1.1.1"));
        assert!(has(
            "addr fe80::1ff:fe23:4567:890a up",
            "ipv6",
            "fe80::1ff:fe23:4567:890a"
        ));
        assert!(has("call (555) 123-4567 today", "phone", "(555) 123-4567"));
        assert!(has("call +44 20 7946 0958", "phone", "+44 20 7946 0958"));
        assert!(has("call 555-123-4567", "phone", "555-123-4567"));
    }

    #[test]
    fn identifiers_with_checksums() {
        assert!(has(
            "card 4111 1111 1111 1111 ok",
            "credit_card",
            "4111 1111 1111 1111"
        ));
        assert!(!has(
            "card 4111 1111 1111 1112 ok",
            "credit_card",
            "4111 1111 1111 1112"
        ));
        assert!(has("ssn 123-45-6789", "us_ssn", "123-45-6789"));
        assert!(!has("ssn 666-45-6789", "us_ssn", "666-45-6789"));
        assert!(has(
            "iban GB82 WEST 1234 5698 7654 32.",
            "iban",
            "GB82 WEST 1234 5698 7654 32"
        ));
        assert!(!has(
            "iban GB82 WEST 1234 5698 7654 33.",
            "iban",
            "GB82 WEST 1234 5698 7654 33"
        ));
        assert!(has("Record MRN-580486.", "mrn", "MRN-580486"));
        // Non-ASCII digits never reach the checksums (they used to panic).
        assert!(find("GB२२ABCDABCD and ४१११ ११११ ११११ ११११")
            .iter()
            .all(|s| s.label != Label::Id));
        // A phone number does not run across lines.
        assert!(!has("ward 95\n110 1200", "phone", "95\n110 1200"));
    }

    #[test]
    fn dates_times_ages_organisations() {
        assert!(has("on 03/14/2021 at", "date_numeric", "03/14/2021"));
        assert!(has("on 2024-01-03.", "date_numeric", "2024-01-03"));
        assert!(!has("ratio 45/67/89", "date_numeric", "45/67/89"));
        assert!(has(
            "on July 19, 2022 with",
            "date_written",
            "July 19, 2022"
        ));
        assert!(has(
            "on 3rd of March 2020",
            "date_written",
            "3rd of March 2020"
        ));
        assert!(has("at 10:30 pm", "time", "10:30 pm"));
        assert!(has("a 93-year-old man", "age_over_89", "93-year-old"));
        assert!(!has("a 72-year-old man", "age_over_89", "72-year-old"));
        assert!(has(
            "to Northgate University Hospital on",
            "organization",
            "Northgate University Hospital"
        ));
        assert!(has(
            "at St. Mary's Hospital.",
            "organization",
            "St. Mary's Hospital"
        ));
        assert!(has(
            "by Acme Widgets Inc. today",
            "organization",
            "Acme Widgets Inc."
        ));
    }
}
