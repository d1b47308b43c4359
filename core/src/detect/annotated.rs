//! Annotated notes: the evaluation format of `tests/data/clinical/`.
//!
//! A note is plain text with every PHI span marked inline as
//! `{{CATEGORY|text}}`; [`parse`] removes the markup and returns the text
//! with the spans' byte offsets in it. The categories are the HIPAA Safe
//! Harbor identifiers that occur in notes ([`Category`]), each served by
//! one of the detector's coarse labels ([`Category::label`]).

use super::Label;
use crate::error::{Error, Result};

/// A HIPAA Safe Harbor identifier category, as annotated in the notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// Patients, relatives, clinicians, typists (initials in signatures too).
    Name,
    /// Every element of a date more specific than the year; clock times.
    Date,
    /// Ages of 90 and over.
    Age,
    /// Geographic units smaller than a state: streets, cities, counties, zip codes.
    Location,
    /// Hospitals, clinics, practices, nursing homes, pharmacies, labs.
    Hospital,
    /// Employers, schools, companies, insurers.
    Organization,
    /// Telephone, pager and fax numbers.
    Phone,
    /// E-mail addresses.
    Email,
    /// Web addresses.
    Url,
    /// IP addresses.
    Ip,
    /// Social security numbers.
    Ssn,
    /// Medical record numbers.
    Mrn,
    /// Account, encounter and billing numbers.
    Account,
    /// Health-plan member and group numbers.
    HealthPlan,
    /// Licence and certificate numbers (DEA, NPI, driver's licence).
    License,
    /// Device identifiers and serial numbers.
    Device,
    /// Vehicle identifiers and plates.
    Vehicle,
    /// Any other unique identifying number or code.
    Id,
}

impl Category {
    /// Every category, in table order.
    pub const ALL: [Category; 18] = [
        Category::Name,
        Category::Date,
        Category::Age,
        Category::Location,
        Category::Hospital,
        Category::Organization,
        Category::Phone,
        Category::Email,
        Category::Url,
        Category::Ip,
        Category::Ssn,
        Category::Mrn,
        Category::Account,
        Category::HealthPlan,
        Category::License,
        Category::Device,
        Category::Vehicle,
        Category::Id,
    ];

    /// The name used in the markup.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Name => "NAME",
            Category::Date => "DATE",
            Category::Age => "AGE",
            Category::Location => "LOCATION",
            Category::Hospital => "HOSPITAL",
            Category::Organization => "ORGANIZATION",
            Category::Phone => "PHONE",
            Category::Email => "EMAIL",
            Category::Url => "URL",
            Category::Ip => "IP",
            Category::Ssn => "SSN",
            Category::Mrn => "MRN",
            Category::Account => "ACCOUNT",
            Category::HealthPlan => "HEALTH_PLAN",
            Category::License => "LICENSE",
            Category::Device => "DEVICE",
            Category::Vehicle => "VEHICLE",
            Category::Id => "ID",
        }
    }

    /// The detector label that must cover a span of this category.
    pub fn label(self) -> Label {
        match self {
            Category::Name => Label::Person,
            Category::Date => Label::Date,
            Category::Age => Label::Age,
            Category::Location => Label::Location,
            Category::Hospital | Category::Organization => Label::Organization,
            Category::Phone | Category::Email | Category::Url | Category::Ip => Label::Contact,
            Category::Ssn
            | Category::Mrn
            | Category::Account
            | Category::HealthPlan
            | Category::License
            | Category::Device
            | Category::Vehicle
            | Category::Id => Label::Id,
        }
    }
}

impl std::str::FromStr for Category {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Category::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(
                    "category",
                    format!(
                        "unknown category {s:?}; the categories are {}",
                        Category::ALL.map(Category::as_str).join(", ")
                    ),
                )
            })
    }
}

/// A gold span of an annotated note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gold {
    /// Byte offset of the first byte in the note's text.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
    /// Its category.
    pub category: Category,
}

/// Clinical words a note annotates as not PHI (`{{DRUG|Xanax}}`,
/// `{{LAB|CO2}}`, `{{ANATOMY|groin}}`): what detection should leave alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Clinical {
    /// A drug name, brand or generic.
    Drug,
    /// A lab test, an imaging study or a procedure, or its abbreviation.
    Lab,
    /// A body part or organ.
    Anatomy,
}

impl Clinical {
    /// Every kind, in table order.
    pub const ALL: [Clinical; 3] = [Clinical::Drug, Clinical::Lab, Clinical::Anatomy];

    /// The name used in the markup.
    pub fn as_str(self) -> &'static str {
        match self {
            Clinical::Drug => "DRUG",
            Clinical::Lab => "LAB",
            Clinical::Anatomy => "ANATOMY",
        }
    }
}

/// An annotated clinical word (or words) of a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClinicalSpan {
    /// Byte offset of the first byte in the note's text.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
    /// What it is.
    pub kind: Clinical,
}

/// A note: its text without markup, its gold spans and its annotated
/// clinical words, in text order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The text as a detector sees it.
    pub text: String,
    /// The annotated spans.
    pub gold: Vec<Gold>,
    /// The annotated clinical words (empty in sets that do not mark them).
    pub clinical: Vec<ClinicalSpan>,
}

/// The annotated notes of a directory (`*.txt`), parsed, in name order.
pub fn read_dir(dir: &std::path::Path) -> Result<Vec<(std::path::PathBuf, Note)>> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let marked = std::fs::read_to_string(&f).map_err(|e| Error::io(&f, e))?;
            Ok((f, parse(&marked)?))
        })
        .collect()
}

/// Parses `{{CATEGORY|text}}` markup (a PHI category, or `DRUG`, `LAB` or
/// `ANATOMY` for clinical words); errors name the line of a bad mark.
pub fn parse(marked: &str) -> Result<Note> {
    let bad = |at: usize, why: &str| {
        let line = marked[..at].matches('\n').count() + 1;
        Error::invalid("note", format!("line {line}: {why}"))
    };
    let mut text = String::with_capacity(marked.len());
    let mut gold = Vec::new();
    let mut clinical = Vec::new();
    let mut rest = marked;
    let mut consumed = 0;
    while let Some(open) = rest.find("{{") {
        text.push_str(&rest[..open]);
        let inner_at = open + 2;
        let Some(close) = rest[inner_at..].find("}}") else {
            return Err(bad(consumed + open, "`{{` without `}}`"));
        };
        let inner = &rest[inner_at..inner_at + close];
        let Some((cat, value)) = inner.split_once('|') else {
            return Err(bad(consumed + open, "a mark needs `{{CATEGORY|text}}`"));
        };
        if value.contains("{{") || value.is_empty() || value.contains('|') {
            return Err(bad(
                consumed + open,
                "a mark's text is empty or holds `{{` or `|`",
            ));
        }
        let kind = Clinical::ALL.into_iter().find(|c| c.as_str() == cat.trim());
        let category: Option<Category> = match kind {
            Some(_) => None,
            None => Some(
                cat.trim()
                    .parse()
                    .map_err(|e: Error| bad(consumed + open, &e.to_string()))?,
            ),
        };
        let start = text.len();
        text.push_str(value);
        match (category, kind) {
            (Some(category), _) => gold.push(Gold {
                start,
                end: text.len(),
                category,
            }),
            (None, Some(kind)) => clinical.push(ClinicalSpan {
                start,
                end: text.len(),
                kind,
            }),
            (None, None) => {}
        }
        let next = inner_at + close + 2;
        consumed += next;
        rest = &rest[next..];
    }
    if rest.contains("}}") {
        return Err(bad(
            consumed + rest.find("}}").unwrap_or(0),
            "`}}` without `{{`",
        ));
    }
    text.push_str(rest);
    Ok(Note {
        text,
        gold,
        clinical,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_removed_and_offsets_point_into_the_text() {
        let n = parse("Dr. {{NAME|Ybarra}} saw pt {{DATE|3/14}}.\nMR:\t{{MRN|8249813}}").unwrap();
        assert_eq!(n.text, "Dr. Ybarra saw pt 3/14.\nMR:\t8249813");
        let got: Vec<(&str, Category)> = n
            .gold
            .iter()
            .map(|g| (&n.text[g.start..g.end], g.category))
            .collect();
        assert_eq!(
            got,
            [
                ("Ybarra", Category::Name),
                ("3/14", Category::Date),
                ("8249813", Category::Mrn)
            ]
        );
        assert_eq!(Category::Hospital.label(), Label::Organization);
    }

    #[test]
    fn clinical_words_are_kept_apart_from_the_gold() {
        let n =
            parse("{{DRUG|Xanax}} 0.5 mg for {{NAME|Ann}}; {{LAB|CO2}} 27.8, {{ANATOMY|groin}}")
                .unwrap();
        assert_eq!(n.text, "Xanax 0.5 mg for Ann; CO2 27.8, groin");
        assert_eq!(n.gold.len(), 1);
        let got: Vec<(&str, Clinical)> = n
            .clinical
            .iter()
            .map(|c| (&n.text[c.start..c.end], c.kind))
            .collect();
        assert_eq!(
            got,
            [
                ("Xanax", Clinical::Drug),
                ("CO2", Clinical::Lab),
                ("groin", Clinical::Anatomy)
            ]
        );
    }

    /// The third held-out set parses (its spans are not evaluated here:
    /// it is kept for one evaluation, docs/detection.md).
    #[test]
    fn the_third_held_out_set_parses() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/clinical_holdout3"
        );
        let notes = read_dir(dir.as_ref()).expect("tests/data/clinical_holdout3");
        assert!(notes.len() >= 30, "{} notes", notes.len());
        let gold: usize = notes.iter().map(|(_, n)| n.gold.len()).sum();
        let clinical: usize = notes.iter().map(|(_, n)| n.clinical.len()).sum();
        assert!(
            gold >= 800 && clinical >= 500,
            "{gold} spans, {clinical} clinical"
        );
    }

    #[test]
    fn bad_marks_name_their_line() {
        for bad in [
            "a\n{{NAME|x",
            "{{NAMEx}}",
            "a\nb {{PLACE|x}}",
            "x}} y",
            "{{NAME|}}",
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains("line"), "{bad:?}: {e}");
        }
    }
}
