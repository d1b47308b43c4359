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

const STATE_CODES: &str = "AL|AK|AZ|AR|CA|CO|CT|DE|DC|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|NV|NH|NJ|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY";

/// Month abbreviations in capitals (`MAR`), for compact dates.
const MONTHS_UPPER: &str = "(?:JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC)";

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
            r(Label::Contact, "phone", r"(?:\+[0-9]{1,3}[ .-]?|\b1[ .-])?(?:\([0-9]{2,4}\)[ .-]?|\b[0-9]{2,4}[ .-])[0-9]{3,4}[ .-][0-9]{3,4}\b", phone_ok, 0.85),
            r(Label::Id, "credit_card", r"\b[0-9](?:[ -]?[0-9]){12,18}\b", luhn, 0.95),
            r(Label::Id, "us_ssn", r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b", ssn_ok, 0.9),
            r(Label::Id, "iban", r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b", iban_ok, 0.95),
            r(Label::Id, "mrn", r"(?i)\b(?:MRN[-:# ]*|medical record (?:number|no\.?)[:# ]*)(?P<v>[0-9]{5,10})\b", always, 0.95),
            r(Label::Date, "date_numeric", r"\b(?:[0-9]{1,2}[/.-][0-9]{1,2}[/.-](?:[0-9]{4}|[0-9]{2})|[0-9]{4}-[0-9]{2}-[0-9]{2})\b", date_ok, 0.9),
            r(Label::Date, "date_written", &format!(r"\b(?:{MONTHS}\.? [0-9]{{1,2}}(?:st|nd|rd|th)?(?:,? [0-9]{{4}})?|[0-9]{{1,2}}(?:st|nd|rd|th)? (?:of )?{MONTHS}\.?(?:,? [0-9]{{4}})?|{MONTHS} [0-9]{{4}})\b"), always, 0.9),
            r(Label::Date, "time", r"(?i)\b(?:[01]?[0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9])?(?:\s?[ap]\.?m\.?|[ap]\b)?\b", always, 0.8),
            // `04MAR25`, `04mar2025`: day, month abbreviation, year, run together.
            r(Label::Date, "date_dmy_compact", &format!(r"(?i)\b(?:0?[1-9]|[12][0-9]|3[01])(?-i:{MONTHS_UPPER}|{MONTHS})(?:[0-9]{{4}}|[0-9]{{2}})\b"), always, 0.9),
            // An ISO date and time run together: `2025-06-11T03:17:44`.
            r(Label::Date, "iso_date", r"\b(?P<v>(?:19|20)[0-9]{2}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01]))T[0-9]", always, 0.9),
            r(Label::Date, "iso_time", r"[0-9]T(?P<v>(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]+)?)?)", always, 0.9),
            // A day and a month (`14-Jan`, `3-Mar`) before a time or a gap.
            r(Label::Date, "day_month", &format!(r"\b(?P<v>(?:0?[1-9]|[12][0-9]|3[01])-(?i:{MONTHS}))(?:$|[ \t]+[0-9]{{1,2}}:|[ \t]{{2,}}|\t|,)"), always, 0.85),
            r(Label::Date, "time_word", r"(?i)\b(?:midnight|noon)\b", always, 0.8),
            r(Label::Age, "age_over_89", r"(?i)\b(?:(?:9[0-9]|1[0-4][0-9])[- ](?:years?|yrs?)[- ]old|age[d:]? (?:9[0-9]|1[0-4][0-9]))\b", always, 0.9),
            r(Label::Organization, "organization", r"\b(?:St\. )?(?:[A-Z][a-zA-Z'&.-]+ ){1,5}(?:(?:Inc|Corp|Ltd)\b\.?|(?:Hospital|Clinic|University|Medical Center|Medical Centre|Health Center|Corporation|LLC|Bank|Institute|Foundation)\b)", always, 0.85),
            // Partial and short dates: `3/14`, `2/03`, `3/80` (m/d or m/yy), `8/2019`.
            r(Label::Date, "date_short", r"(?:^|[^0-9/.+-])(?P<v>(?:0?[1-9]|1[0-2])/(?:[0-9]{2}|[0-9]|(?:19|20)[0-9]{2}))(?:$|[^0-9/%])", always, 0.8),
            r(Label::Date, "date_dmy_month", &format!(r"(?i)\b[0-9]{{1,2}}[- ]{MONTHS}\.?[- ](?:[0-9]{{4}}|[0-9]{{2}})\b|\b{MONTHS}\.?[- ]'?[0-9]{{2}}\b|\b{MONTHS}-[0-9]{{4}}\b")
                , dmy_ok, 0.9),
            r(Label::Date, "date_written_caps", &format!(r"\b(?i:{MONTHS})\.? [0-9]{{1,2}}(?:st|nd|rd|th|ST|ND|RD|TH)?(?:,? [0-9]{{4}})?\b|\b(?i:{MONTHS}),? [0-9]{{4}}\b")
                , always, 0.9),
            r(Label::Date, "month_name", r"\b(?:January|February|March|April|June|July|August|September|October|November|December|JANUARY|FEBRUARY|MARCH|APRIL|JUNE|JULY|AUGUST|SEPTEMBER|OCTOBER|NOVEMBER|DECEMBER|Sept|Jan|Feb|Aug|Oct|Nov|Dec)\b|(?i:\b(?:in|since|until|till|by|early|late|mid|of|last|next|this|through|during)[ -])(?P<v>May|MAY)\b", month_ok, 0.8),
            r(Label::Date, "weekday", r"\b(?:(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day|(?:MON|TUES|WEDNES|THURS|FRI|SATUR|SUN)DAY)s?\b", always, 0.85),
            r(Label::Date, "holiday", r"(?i)\b(?:Christmas(?: Eve| Day)?|Thanksgiving(?: Day)?|Easter(?: Sunday)?|New Year'?s?(?: Day| Eve)?|Valentine'?s(?: Day)?|Memorial Day|Labor Day|Independence Day|July 4th|Fourth of July|4th of July|Halloween|Mother'?s Day|Father'?s Day|Veterans'? Day|MLK Day|Martin Luther King(?: Jr\.?)? Day|Presidents'? Day|Columbus Day|Hanukkah|Chanukah|Passover|Yom Kippur|Rosh Hashanah|Ramadan|Eid(?: al-Fitr| al-Adha)?|Diwali|Lunar New Year|Juneteenth|Good Friday|Ash Wednesday|Palm Sunday)\b", always, 0.85),
            r(Label::Date, "time_caps", r"\b(?:[01]?[0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9])?(?:\s?[AaPp]\.?[Mm]\.?)?|\b(?:1[0-2]|[1-9])\s?(?:[AaPp]\.[Mm]\.|[AaPp][Mm]\b)", always, 0.8),
            // The end of a range of short dates (`8/7-8/9`, `10/2-10/15`):
            // `date_short` takes the start only.
            r(Label::Date, "date_range_end", r"(?:^|[^0-9/])(?:0?[1-9]|1[0-2])/(?:[0-2]?[0-9]|3[01]|(?:19|20)[0-9]{2})-(?P<v>(?:0?[1-9]|1[0-2])/(?:[0-2]?[0-9]|3[01]|(?:19|20)[0-9]{2}))(?:$|[^0-9/%])", always, 0.8),
            // A year and month (`dx 2019-06`).
            r(Label::Date, "date_year_month", r"(?:^|[^0-9-])(?P<v>(?:19|20)[0-9]{2}-(?:0[1-9]|1[0-2]))(?:$|[^0-9-])", always, 0.8),
            r(Label::Age, "age_over_89_short", r"(?i)\b(?P<v>9[0-9]|1[01][0-9])(?:[ -]?(?:y/?o|y\.o\.|yr?s?|years?|year-old|yo[mf]?|y|-year-old)\b|[mf]\b)|(?i:\bage[d:]?\s*|\bage\s+of\s+|\bat\s+)(?P<w>9[0-9]|1[01][0-9])\b", always, 0.9),
            r(Label::Id, "labelled_id", r"(?i)\b(?:MRN|MR|MR\s*No|Med(?:ical)?\s*Rec(?:ord)?(?:\s*(?:No|Number|Num))?|Unit\s*(?:No|Number|#)|Hosp(?:ital)?\s*(?:No|#)|Chart(?:\s*(?:No|Number))?|Patient\s*ID|Pt\s*ID|Acct|Account|Acc(?:t)?\s*No|Encounter|Enc|Visit|FIN|CSN|HAR|Billing|Claim|Member(?:\s*ID)?|Subscriber(?:\s*ID)?|Group|Grp|Policy|Medicaid(?:\s*ID)?|Medicare(?:\s*ID)?|MBI|HICN|Plan\s*ID|Ins(?:urance)?\s*ID|DEA|NPI|Lic(?:ense|ence)?|CLIA|Cert(?:ificate)?|Serial|S/N|SN|Lot|Model|Device\s*ID|Implant\s*ID|UDI|VIN|Plate|License\s*Plate|Tag|Job|Dictation|Doc(?:ument)?(?:\s*ID)?|Accession|Acc|Accn|Specimen|Spec|Order|Req(?:uisition)?|Case|Ref(?:erence)?|Confirmation|Conf|Auth(?:orization)?|Badge|Employee\s*ID|User(?:\s*ID)?|Interpreter|ID|Report|Study|Exam|Tracking|Ticket|Transmission|Monitor|Receiver|Box|Account\s*Number|Reg(?:istration)?|Passport|SSN|SS|Social\s*Security(?:\s*(?:No|Number))?|Certificate|Permit|Call)\s*(?:#|No\.?|Number|Num|ID)?\s*(?:#|No\.?)?\s*[:#=-]?[ \t]*(?P<v>[A-Z0-9](?:[-./]?[A-Z0-9]){2,24})", labelled_ok, 0.9),
            r(Label::Id, "ssn_partial", r"\b(?:[xX*#]{3}|[0-9]{3})[- ](?:[xX*#]{2}|[0-9]{2})[- ][0-9]{4}\b", ssn_loose, 0.85),
            r(Label::Id, "ssn_bare", r"(?i)\b(?:SSN|SS#|Social Security(?: No\.?| Number| #)?)\s*[:#]?\s*(?P<v>[0-9]{9})\b", always, 0.9),
            r(Label::Id, "alnum_code", r"\b[A-Z]{1,5}-?[0-9][0-9A-Z]*(?:-[0-9A-Z]+)+\b|\b[A-Z]{1,5}-?[0-9]{4,}[A-Z]?\b|\b[A-Z]{2,5}-[0-9A-F]{6,}\b", code_ok, 0.75),
            r(Label::Date, "weekday_short", r"(?i)\b(?P<v>(?:Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun))\.?,?[ \t]+[0-9]{1,2}/[0-9]{1,2}", always, 0.9),
            r(Label::Id, "plate", r"(?i)\b(?:plate|tag|lic(?:ense|ence)?)\b[^:\n]{0,24}?[:#]?[ \t]+(?P<v>(?:[A-Z]{1,2}[ \t][0-9]{4,8})|(?-i:[A-Z0-9]{2,4}[ -][A-Z0-9]{2,4}))\b", plate_ok, 0.85),
            r(Label::Id, "long_number", r"(?:^|[^0-9.,/-])(?P<v>[0-9]{7,})(?:$|[^0-9.,/-])", always, 0.7),
            // A short number after a word that names a phone: a pager,
            // an extension, a callback or cell number written without its
            // area code (`pager 555-0177`, `ext. 4-0156`, `Callback #:
            // 555-0193`).
            r(Label::Contact, "pager", r"(?i)\b(?:pager|pgr|beeper|page|paged|bleep|ext|extension|callback|call\s+back|cell|mobile|phone|tel|fax)\b\.?\s*(?:#|no\.?)?\s*[:#]?\s*(?:at\s+)?(?P<v>[0-9]{3}[-.][0-9]{4}|[0-9]{1,2}-[0-9]{4}|[0-9]{4,7})\b", always, 0.8),
            // A GS1 device identifier with its application identifiers:
            // `(01)07613327123458(17)300131(10)K88213047` (GTIN, expiry, lot).
            r(Label::Id, "udi_gs1", r"\(01\)[0-9]{14}(?:\((?:10|11|17|21|240|30)\)[A-Za-z0-9-]{1,20}){1,4}", always, 0.95),
            r(Label::Location, "street_address", r"(?i)\b[0-9]{1,6}[A-Z]?(?:-[0-9]+)?[ \t]+(?:[NSEW]\.?[ \t]+)?(?:(?-i:[A-Z][A-Za-z'.-]*|[0-9]+(?:st|nd|rd|th))[ \t]+){1,4}(?:Street|St|Road|Rd|Avenue|Ave|Boulevard|Blvd|Lane|Ln|Drive|Dr|Way|Court|Ct|Place|Pl|Terrace|Ter|Circle|Cir|Parkway|Pkwy|Highway|Hwy|Route|Rte|Square|Sq|Trail|Trl|Pike|Turnpike|Tpke|Alley|Row|Path|Loop|Crescent|Close|Plaza|Run|Ridge|Hollow|Point|Pt|Crossing|Xing|Commons|Green|Walk|Heights|Extension|Ext)\b\.?(?:,?[ \t]+(?:Apt|Apartment|Suite|Ste|Unit|#|Fl|Floor|Rm|Room|Bldg|Building|Lot|Box)\.?[ \t]*#?[ \t]*[A-Za-z0-9-]+)?", street_number_ok, 0.85),
            r(Label::Location, "street_name", r"\b(?:[A-Z][a-z]+[ \t]){1,3}(?:Street|St|Road|Rd|Avenue|Ave|Boulevard|Blvd|Lane|Ln|Terrace|Drive|Parkway|Pkwy|Pike|Turnpike|Place|Court|Circle|Way)\b\.?(?:[ \t]+(?:Apt|Apartment|Suite|Ste|Unit|#)\.?[ \t]*#?[A-Za-z0-9-]+)?|\b(?:[A-Z][a-z]+[ \t]){1,2}(?:Pavilion|Wing|Tower|Inn|Building|Plaza|Apartments|Towers)\b|\b(?:[A-Z]+[ \t]){1,2}(?:PAVILION|WING|TOWER|BUILDING)\b", street_ok, 0.85),
            r(Label::Location, "zip_labelled", r"(?i)\b(?:zip|zip code|postal code|zipcode)\s*[:#]?\s*(?P<v>[0-9]{5}(?:-[0-9]{4})?)\b", always, 0.9),
            r(Label::Location, "po_box", r"(?i)\bP\.?\s?O\.?\s*Box\s+[0-9]+", always, 0.85),
            r(Label::Location, "city_state_zip", &format!(r"(?P<v>\b(?:[A-Z][A-Za-z.'-]+[ \t]){{0,3}}[A-Z][A-Za-z.'-]+,?[ \t]+(?:{STATE_CODES})\.?(?:[ \t]+[0-9]{{5}}(?:-[0-9]{{4}})?)|\b(?:[A-Z][A-Za-z.'-]+[ \t]){{0,3}}[A-Z][A-Za-z.'-]+,[ \t]+(?:{STATE_CODES})\b|\b(?:{STATE_CODES})[ \t]+[0-9]{{5}}(?:-[0-9]{{4}})?\b)"), city_ok, 0.85),
            r(Label::Location, "route", r"\b(?:Route|ROUTE|Rte\.?|Highway|HIGHWAY|Hwy\.?|Interstate|I-)[ \t]?[0-9]{1,3}\b", always, 0.75),
        ]
    })
}

/// Every rule match in `text` (possibly overlapping each other). A rule
/// whose pattern has a group named `v` reports that group (the value after
/// a field label), others the whole match.
pub fn find(text: &str) -> Vec<Span> {
    let mut out = Vec::new();
    for rule in rules() {
        for c in rule.re.captures_iter(text) {
            let Some(m) = c.name("v").or_else(|| c.get(0)) else {
                continue;
            };
            if (rule.check)(m.as_str()) && !(rule.name == "date_short" && is_score(text, &m)) {
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
    out.extend(super::times::find(text));
    out
}

/// Words before a fraction that make it a score (`pain 7/10`, `rated
/// 3/10`, `strength 4/5`), and after it (`7/10 pain`, `5/5 strength`).
const SCORE_BEFORE: [&str; 14] = [
    "pain",
    "score",
    "rated",
    "rates",
    "rating",
    "severity",
    "intensity",
    "scale",
    "nrs",
    "vas",
    "strength",
    "power",
    "motor",
    "grade",
];
const SCORE_AFTER: [&str; 4] = ["pain", "strength", "power", "bilat"];

/// Scales whose scores take any denominator, named right before the
/// fraction (`Apgars 8/9`, `Mini-Cog 4/5`, `score 8/9`, `GCS 3/15`).
const SCALE_BEFORE: [&str; 8] = [
    "apgar", "apgars", "cog", "mmse", "moca", "gcs", "score", "grade",
];
/// A fraction that is a dose (`1/2 tab`, `bup/nlx 8/2 mg`), whatever
/// the numbers.
const DOSE_AFTER: [&str; 11] = [
    "tab", "tabs", "tablet", "pill", "cap", "caps", "mg", "mcg", "ml", "units", "puff",
];
/// A murmur's grade (`2/6 SEM`, `3/6 holosystolic murmur`).
const MURMUR_AFTER: [&str; 7] = [
    "sem",
    "murmur",
    "systolic",
    "diastolic",
    "holosystolic",
    "hsm",
    "ejection",
];

/// A fraction that counts things seen or sampled (`4/10 HPF`, `6/10
/// sites`, `2/14 lymph nodes`, `3/12 cores positive`), whatever the
/// numbers.
const COUNT_AFTER: [&str; 9] = [
    "hpf",
    "hpfs",
    "lpf",
    "sites",
    "nodes",
    "lymph",
    "cores",
    "fields",
    "specimens",
];

/// A short "date" that is a score, a grade or a dose: `N/10` or `N/5`
/// with a score word just before or after it, any fraction right after a
/// scale's name or before a dose unit, `N/6` or `N/4` before a murmur.
fn is_score(text: &str, m: &regex::Match) -> bool {
    let v = m.as_str();
    let before = crate::text::before(text, m.start(), 24).to_lowercase();
    let after: String = text[m.end()..]
        .chars()
        .take(14)
        .collect::<String>()
        .to_lowercase();
    let after = after.trim_start();
    let next_word = after
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("");
    let last_word = before
        .split(|c: char| !c.is_alphanumeric())
        .rev()
        .find(|w| !w.is_empty())
        .unwrap_or("");
    if DOSE_AFTER.contains(&next_word)
        || COUNT_AFTER.contains(&next_word)
        || SCALE_BEFORE.contains(&last_word)
    {
        return true;
    }
    if (v.ends_with("/6") || v.ends_with("/4")) && MURMUR_AFTER.contains(&next_word) {
        return true;
    }
    if !(v.ends_with("/10") || v.ends_with("/5")) {
        return false;
    }
    SCORE_BEFORE.iter().any(|w| before.contains(w))
        || SCORE_AFTER.iter().any(|w| after.starts_with(w))
}

/// `Sept`, `Jan` ... alone are months unless part of a name (`Jan`
/// is checked by the caller's context); every match passes here.
fn month_ok(_: &str) -> bool {
    true
}

/// A labelled identifier has at least two digits and is not a date, a
/// dose or a plain small number.
fn labelled_ok(s: &str) -> bool {
    let d = digits(s).len();
    let short_date = {
        let p: Vec<&str> = s.split('/').collect();
        p.len() == 2
            && p.iter()
                .all(|x| x.len() <= 4 && x.chars().all(|c| c.is_ascii_digit()))
    };
    let small_number = d <= 3 && s.chars().all(|c| c.is_ascii_digit());
    !(d < 2 || date_ok(s) || short_date || small_number)
}

/// `xxx-xx-1234`, `123 45 6789`: a masked SSN, or a whole one passing [`ssn_ok`].
fn ssn_loose(s: &str) -> bool {
    let masked = s.starts_with(['x', 'X', '*', '#']);
    masked || ssn_ok(&s.replace(' ', "-"))
}

/// `Springfield, MA 01103`: not `Tylenol PO` (the last word before the
/// state code must be capitalised and the code upper case).
fn city_ok(s: &str) -> bool {
    let zip = s.ends_with(|c: char| c.is_ascii_digit());
    let code =
        s.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == ' ' || c == '\t');
    let code = code.trim_end_matches('.');
    let code = &code[code.len().saturating_sub(2)..];
    // Codes that are also credentials or words need a zip code after them.
    let ambiguous = [
        "MD", "PA", "OK", "IN", "OR", "ID", "ME", "HI", "DE", "CO", "MA", "MS", "NE", "OH", "LA",
        "AL", "DO", "SC", "NP",
    ];
    zip && code != "ID" || !zip && !ambiguous.contains(&code)
}

/// A plate or licence with a digit in it.
fn plate_ok(s: &str) -> bool {
    digits(s).len() >= 2
}

/// `Mill St` and `Maple Terrace`, not `Dr. Lopez` or `the Main Building` (a
/// first word of vocabulary) nor `St. Agnes`.
fn street_ok(s: &str) -> bool {
    let first = s.split_whitespace().next().unwrap_or("");
    !matches!(
        first.to_lowercase().as_str(),
        "the"
            | "a"
            | "an"
            | "this"
            | "that"
            | "our"
            | "your"
            | "his"
            | "her"
            | "their"
            | "main"
            | "new"
            | "old"
            | "east"
            | "west"
            | "north"
            | "south"
    ) && !s.ends_with(" Dr")
        && !s.ends_with(" Dr.")
}

/// `12 Oak Street`, not `09 BY DR.`: a word of the street's name that is
/// not vocabulary.
fn street_number_ok(s: &str) -> bool {
    s.split_whitespace().skip(1).any(|w| {
        w.chars().any(char::is_alphabetic)
            && !super::vocab::is_vocabulary(w.trim_end_matches(['.', ',']))
            && !matches!(
                w.to_lowercase().trim_end_matches('.'),
                "st" | "street"
                    | "rd"
                    | "road"
                    | "ave"
                    | "avenue"
                    | "dr"
                    | "drive"
                    | "lane"
                    | "ln"
                    | "way"
                    | "n"
                    | "s"
                    | "e"
                    | "w"
            )
    })
}

/// A code of letters and digits with four digits or more (`S19-4471`,
/// `CT-240331-0041`), not a vertebra or a lab panel (`C5-6`, `T2`).
fn code_ok(s: &str) -> bool {
    // `MRN-580486`: the field label's own rule reports the value alone.
    let prefix: String = s.chars().take_while(char::is_ascii_alphabetic).collect();
    let label = matches!(
        prefix.to_ascii_lowercase().as_str(),
        "mrn" | "mr" | "acct" | "ssn" | "fin" | "csn" | "dob" | "npi" | "dea"
    );
    digits(s).len() >= 4 && !label
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
    // Three or more four-digit clock times in a row (`0600 1400 2200`,
    // a medication's administration times) are times, not a phone.
    let groups: Vec<&str> = s.split([' ', '.', '-']).filter(|g| !g.is_empty()).collect();
    let clock = |g: &&str| {
        g.len() == 4
            && g.bytes().all(|b| b.is_ascii_digit())
            && g[..2].parse::<u32>().is_ok_and(|h| h <= 23)
            && g[2..].parse::<u32>().is_ok_and(|m| m <= 59)
    };
    let times = groups.len() >= 3 && groups.iter().all(clock);
    (7..=15).contains(&n) && !times
}

/// `14-Jan 18` is a day and month before an hour (`14-Jan 18:27`), not a
/// date with a two-digit year: the rule sees only its match, so a match
/// ending in a space and two digits is refused here and `day_month` takes
/// the date.
fn dmy_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let n = b.len();
    !(n >= 3
        && b[n - 3] == b' '
        && b[n - 2].is_ascii_digit()
        && b[n - 1].is_ascii_digit()
        && s.starts_with(|c: char| c.is_ascii_digit()))
}

fn ipv6_ok(s: &str) -> bool {
    s.contains("::") || s.matches(':').count() == 7
}

/// Numeric dates with a plausible day and month (either order).
fn date_ok(s: &str) -> bool {
    // One separator throughout: `8.6-10` and `3.4-10` are reference ranges.
    let mut seps = s.chars().filter(|c| matches!(c, '/' | '.' | '-'));
    let first = seps.next();
    if seps.any(|c| Some(c) != first) {
        return false;
    }
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
    fn compact_iso_and_day_month_dates_and_times() {
        assert!(has(
            "EXAM DATE: 04MAR25 1422",
            "date_dmy_compact",
            "04MAR25"
        ));
        assert!(has("drawn 4Mar2025", "date_dmy_compact", "4Mar2025"));
        assert!(has("MSH^2025-06-11T03:17:44^x", "iso_date", "2025-06-11"));
        assert!(has("MSH^2025-06-11T03:17:44^x", "iso_time", "03:17:44"));
        let t = "  #1  14-Jan 18:27:11 - 18:29:40   run";
        assert!(has(t, "day_month", "14-Jan"), "{:?}", found(t));
        assert!(has(t, "time", "18:27:11"), "{:?}", found(t));
        assert!(!has(t, "date_dmy_month", "14-Jan 18"), "{:?}", found(t));
        // A day-month-year with a four-digit or two-digit year stays whole.
        assert!(has(
            "seen 14-Jan-2024 in clinic",
            "date_dmy_month",
            "14-Jan-2024"
        ));
        assert!(has("arrived 9:15a by car", "time", "9:15a"));
        assert!(has("woke at midnight", "time_word", "midnight"));
        assert!(has(
            "clinic notes 6/2022-1/2025, labs",
            "date_range_end",
            "1/2025"
        ));
        // Administration times in a row are not a phone.
        assert!(!found("Meropenem 1 g IV q8h\t0600 1400 2200")
            .iter()
            .any(|(r, _)| *r == "phone"));
        assert!(has("call 555 0123 4567", "phone", "555 0123 4567"));
    }

    #[test]
    fn gs1_device_identifiers_are_one_id() {
        let t = "UDI (01)07613327123458(17)300131(10)K88213047 implanted";
        assert!(
            has(t, "udi_gs1", "(01)07613327123458(17)300131(10)K88213047"),
            "{:?}",
            found(t)
        );
        assert!(!found("(01) see below").iter().any(|(r, _)| *r == "udi_gs1"));
    }

    #[test]
    fn short_numbers_after_a_phone_word_are_contacts() {
        for (t, v) in [
            ("cardiology fellow (pager 555-0177).", "555-0177"),
            ("MD, PGY-2   pgr 555-0118", "555-0118"),
            ("discussed with Dr. Moreau (ext. 4-0156)", "4-0156"),
            ("Case Manager, ext 7-4412", "7-4412"),
            ("Callback #: 555-0193 (cell)", "555-0193"),
            ("notified via page 555-0187.", "555-0187"),
            ("paged at 4471", "4471"),
        ] {
            assert!(has(t, "pager", v), "{t}: {:?}", found(t));
        }
        // Not after a phone word, or not a phone's shape.
        assert!(!found("WBC 12.5, Hgb 555-0177")
            .iter()
            .any(|(r, _)| *r == "pager"));
        assert!(!found("Ext: 2+ edema bilaterally")
            .iter()
            .any(|(r, _)| *r == "pager"));
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
        // The value, not its label: replacement keeps `MRN-`.
        assert!(has("Record MRN-580486.", "mrn", "580486"));
        // Non-ASCII digits never reach the checksums (they used to panic).
        assert!(find("GB२२ABCDABCD and ४१११ ११११ ११११ ११११")
            .iter()
            .all(|s| s.label != Label::Id));
        // A phone number does not run across lines.
        assert!(!has("ward 95\n110 1200", "phone", "95\n110 1200"));
    }

    #[test]
    fn scores_are_not_short_dates() {
        for (text, score) in [
            ("c/o pain 7/10 since", "7/10"),
            ("rates it 3/10 today", "3/10"),
            ("6/10 pain at rest", "6/10"),
            ("Strength 4/5 in LUE", "4/5"),
            ("5/5 strength bilat", "5/5"),
            ("Live female infant, Apgars 8/9, named", "8/9"),
            ("Timed up-and-go 17 sec. Mini-Cog 4/5.", "4/5"),
            ("mitoses 2; score 8/9).", "8/9"),
            ("Heart RRR, 2/6 SEM RUSB.", "2/6"),
            ("Mitoses up to 4/10 HPF.", "4/10"),
            ("Monofilament 6/10 sites bilat", "6/10"),
            ("carbidopa/levodopa 25/100, 1/2 tab TID", "1/2"),
            ("bup/nlx 8/2 mg SL, tolerated", "8/2"),
        ] {
            assert!(!has(text, "date_short", score), "{text}");
        }
        // Without a score word they are dates; other fractions stay dates.
        assert!(has("seen 3/10 in clinic", "date_short", "3/10"));
        assert!(has("pain since 3/14", "date_short", "3/14"));
        assert!(has("admitted 2/6 with CP", "date_short", "2/6"));
        assert!(has("seen on 8/9 in clinic", "date_short", "8/9"));
    }

    #[test]
    fn dates_times_ages_organisations() {
        assert!(has("on 03/14/2021 at", "date_numeric", "03/14/2021"));
        assert!(has("on 2024-01-03.", "date_numeric", "2024-01-03"));
        assert!(!has("ratio 45/67/89", "date_numeric", "45/67/89"));
        assert!(!has("WBC 7.2 (ref 3.4-10.8)", "date_numeric", "3.4-10"));
        assert!(has("seen 3.14.21 in clinic", "date_numeric", "3.14.21"));
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
        assert!(has("between 2 a.m. and 5", "time_caps", "2 a.m."));
        assert!(has(
            "ceftriaxone 8/7-8/9 (stopped)",
            "date_range_end",
            "8/9"
        ));
        assert!(has("CGM report 10/2-10/15:", "date_range_end", "10/15"));
        assert!(has(
            "pancolitis, dx 2019-06) on",
            "date_year_month",
            "2019-06"
        ));
        assert!(!has("on 2019-06-14 in", "date_year_month", "2019-06"));
        assert!(!has("from 2018-2019", "date_year_month", "2018-20"));
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
