//! Masking rules as written in security labels.
//!
//! A privacy officer declares rules once, in SQL, and both sanitized views
//! and the proxy obey them:
//!
//! ```sql
//! SECURITY LABEL FOR dptext ON COLUMN records.note IS 'MASKED WITH santext(eps => 3)';
//! SECURITY LABEL FOR dptext ON ROLE analyst IS 'MASKED';
//! ```
//!
//! The grammar (keywords and names are case-insensitive):
//!
//! ```text
//! column label := MASKED WITH stage { THEN stage } [ GROUPED BY column ]
//! stage        := mechanism [ '(' [ arg { ',' arg } ] ')' ]
//! arg          := name '=>' value
//! value        := number | 'quoted string' ('' for a quote) | true | false | bare word
//! role label   := MASKED
//! ```
//!
//! Parsing validates the mechanism and every parameter with
//! [`MechanismSpec::parse`], so a bad rule is refused when the label is
//! set, not when a query first meets it.
//!
//! `GROUPED BY column` names another column of the same row whose value
//! fixes `deidentify`'s date shift, so that every note of one patient moves
//! by the same number of days (`MASKED WITH deidentify(operators =>
//! 'DATE:shift') GROUPED BY patient_id`); it needs an entity replacement
//! stage, and excludes a literal `group` parameter.

use crate::error::{Error, Result};
use crate::mechanisms::MechanismSpec;

/// A validated column rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The mechanism with its parameters, defaults filled in.
    pub spec: MechanismSpec,
    /// `GROUPED BY column`: the column of the same row whose value is the
    /// date shift's grouping value (as written; resolved by the front end).
    pub group_column: Option<String>,
}

impl Rule {
    /// The mechanism's name.
    pub fn mechanism(&self) -> &'static str {
        self.spec.name()
    }

    /// Every parameter as JSON, defaults filled in.
    pub fn params(&self) -> serde_json::Value {
        self.spec.params_json()
    }

    /// The label that states this rule with every parameter spelled out,
    /// e.g. `MASKED WITH santext(eps => 3, embedding => 'glove')`, a chain's
    /// stages joined by `THEN`.
    pub fn to_label(&self) -> String {
        let stage = |spec: &MechanismSpec| {
            let params = spec.params_json();
            let args: Vec<String> = params
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => format!("{k} => '{}'", s.replace('\'', "''")),
                    other => format!("{k} => {other}"),
                })
                .collect();
            format!("{}({})", spec.name(), args.join(", "))
        };
        let body = match &self.spec {
            MechanismSpec::Chain(stages) => {
                stages.iter().map(stage).collect::<Vec<_>>().join(" THEN ")
            }
            one => stage(one),
        };
        match &self.group_column {
            Some(c) => format!("MASKED WITH {body} GROUPED BY {}", quote_column(c)),
            None => format!("MASKED WITH {body}"),
        }
    }

    /// The spec for one row: its grouping column's value (`None`: NULL or
    /// no `GROUPED BY`) set as the date shift's group.
    pub fn spec_for_row(&self, group: Option<&str>) -> MechanismSpec {
        match self.group_column {
            Some(_) => self.spec.clone().with_group(group),
            None => self.spec.clone(),
        }
    }
}

/// A column name as a label writes it: bare when it is a plain lower-case
/// word, quoted ('' for a quote) otherwise.
fn quote_column(c: &str) -> String {
    let plain = c
        .chars()
        .next()
        .is_some_and(|ch| ch.is_ascii_lowercase() || ch == '_')
        && c.chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_');
    if plain {
        c.to_string()
    } else {
        format!("'{}'", c.replace('\'', "''"))
    }
}

fn syntax(reason: impl Into<String>) -> Error {
    Error::invalid(
        "label",
        format!(
            "{}; expected MASKED WITH mechanism(name => value, ...), e.g. 'MASKED WITH santext(eps => 3)'",
            reason.into()
        ),
    )
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Num(String),
    Arrow,
    Open,
    Close,
    Comma,
}

/// A token as the label spells it, for error messages (never Rust's
/// debug form).
impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Word(w) => write!(f, "{w}"),
            Tok::Str(s) => write!(f, "'{}'", s.replace('\'', "''")),
            Tok::Num(n) => write!(f, "{n}"),
            Tok::Arrow => write!(f, "=>"),
            Tok::Open => write!(f, "("),
            Tok::Close => write!(f, ")"),
            Tok::Comma => write!(f, ","),
        }
    }
}

fn lex(s: &str) -> Result<Vec<Tok>> {
    let mut out = Vec::new();
    let mut it = s.char_indices().peekable();
    while let Some(&(i, c)) = it.peek() {
        if c.is_whitespace() {
            it.next();
        } else if c == '(' || c == ')' || c == ',' {
            it.next();
            out.push(match c {
                '(' => Tok::Open,
                ')' => Tok::Close,
                _ => Tok::Comma,
            });
        } else if c == '=' {
            it.next();
            match it.next() {
                Some((_, '>')) => out.push(Tok::Arrow),
                _ => return Err(syntax(format!("'=' at byte {i} is not part of '=>'"))),
            }
        } else if c == '\'' {
            it.next();
            let mut v = String::new();
            loop {
                match it.next() {
                    Some((_, '\'')) => {
                        if matches!(it.peek(), Some((_, '\''))) {
                            it.next();
                            v.push('\'');
                        } else {
                            break;
                        }
                    }
                    Some((_, ch)) => v.push(ch),
                    None => return Err(syntax(format!("unterminated string at byte {i}"))),
                }
            }
            out.push(Tok::Str(v));
        } else if c.is_ascii_digit() || c == '-' || c == '+' || c == '.' {
            let mut v = String::new();
            while let Some(&(_, ch)) = it.peek() {
                if ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '+') {
                    v.push(ch);
                    it.next();
                } else {
                    break;
                }
            }
            out.push(Tok::Num(v));
        } else if c.is_alphabetic() || c == '_' {
            let mut v = String::new();
            while let Some(&(_, ch)) = it.peek() {
                if ch.is_alphanumeric() || ch == '_' || ch == '+' {
                    v.push(ch);
                    it.next();
                } else {
                    break;
                }
            }
            out.push(Tok::Word(v));
        } else {
            return Err(syntax(format!("unexpected character `{c}` at byte {i}")));
        }
    }
    Ok(out)
}

fn value_of(tok: Tok, name: &str) -> Result<serde_json::Value> {
    Ok(match tok {
        Tok::Str(s) => serde_json::Value::String(s),
        Tok::Num(n) => {
            let x: f64 = n
                .parse()
                .map_err(|_| syntax(format!("\"{n}\" (the value of {name}) is not a number")))?;
            // Integers stay integers so that integer parameters (k) accept them.
            match n.parse::<i64>() {
                Ok(i) => serde_json::Value::from(i),
                Err(_) => serde_json::Number::from_f64(x)
                    .map(serde_json::Value::Number)
                    .ok_or_else(|| syntax(format!("{name} must be a finite number")))?,
            }
        }
        Tok::Word(w) if w.eq_ignore_ascii_case("true") => serde_json::Value::Bool(true),
        Tok::Word(w) if w.eq_ignore_ascii_case("false") => serde_json::Value::Bool(false),
        Tok::Word(w) => serde_json::Value::String(w),
        other => {
            return Err(syntax(format!(
                "expected a value for {name}, found `{other}`"
            )))
        }
    })
}

fn keyword(toks: &mut std::iter::Peekable<std::vec::IntoIter<Tok>>, kw: &str) -> Result<()> {
    match toks.next() {
        Some(Tok::Word(w)) if w.eq_ignore_ascii_case(kw) => Ok(()),
        Some(other) => Err(syntax(format!("expected {kw}, found `{other}`"))),
        None => Err(syntax(format!("expected {kw}, found the end of the label"))),
    }
}

/// True for the column label `ALLOW` (any case, surrounding spaces
/// ignored): the column is declared safe to read raw, so that it is not
/// refused where `dptext.deny_unlabelled_text` denies unlabelled text. It
/// is not a rule: a `MASKED WITH` label on the same column anywhere in its
/// inheritance family wins over it.
///
/// ```
/// assert!(dptext_core::rules::is_allow_label(" allow "));
/// assert!(!dptext_core::rules::is_allow_label("MASKED WITH santext(eps => 3)"));
/// ```
pub fn is_allow_label(label: &str) -> bool {
    label.trim().eq_ignore_ascii_case("allow")
}

/// Parses and validates a column label.
///
/// ```
/// use dptext_core::rules::parse_column_label;
/// let rule = parse_column_label("MASKED WITH santext_plus(eps => 3, p => 0.2)").unwrap();
/// assert_eq!(rule.mechanism(), "santext_plus");
/// assert_eq!(rule.params()["w"], 0.9);
/// assert!(parse_column_label("MASKED WITH santext(eps => -1)").is_err());
/// ```
pub fn parse_column_label(label: &str) -> Result<Rule> {
    let mut toks = lex(label)?.into_iter().peekable();
    keyword(&mut toks, "masked")?;
    keyword(&mut toks, "with")?;
    let mut stages = vec![stage(&mut toks)?];
    let mut group_column = None;
    while let Some(t) = toks.next() {
        match t {
            Tok::Word(w) if w.eq_ignore_ascii_case("then") && group_column.is_none() => {
                stages.push(stage(&mut toks)?)
            }
            Tok::Word(w) if w.eq_ignore_ascii_case("grouped") && group_column.is_none() => {
                keyword(&mut toks, "by")?;
                group_column = Some(match toks.next() {
                    // A bare name folds to lower case, as SQL does; a
                    // quoted one is kept as written.
                    Some(Tok::Word(c)) => c.to_lowercase(),
                    Some(Tok::Str(c)) if !c.is_empty() => c,
                    _ => return Err(syntax("expected a column name after GROUPED BY")),
                });
            }
            extra => {
                return Err(syntax(format!(
                    "unexpected `{extra}` after the parameter list (chain mechanisms with THEN; GROUPED BY column comes last)"
                )))
            }
        }
    }
    let spec = MechanismSpec::chain(stages)?;
    if group_column.is_some() {
        if !spec.has_deidentify() {
            return Err(Error::invalid(
                "label",
                "GROUPED BY fixes the date shift per group: the rule has no deidentify stage (or ndd stage with operators)",
            ));
        }
        if spec.params_json().get("group").is_some()
            || matches!(&spec, MechanismSpec::Chain(st) if st.iter().any(|s| s.params_json().get("group").is_some()))
        {
            return Err(Error::invalid(
                "label",
                "a rule takes a group parameter or GROUPED BY column, not both",
            ));
        }
    }
    Ok(Rule { spec, group_column })
}

/// One `mechanism [ '(' args ')' ]` of a label.
fn stage(toks: &mut std::iter::Peekable<std::vec::IntoIter<Tok>>) -> Result<MechanismSpec> {
    let mechanism = match toks.next() {
        Some(Tok::Word(w)) => w,
        Some(other) => {
            return Err(syntax(format!(
                "expected a mechanism name, found `{other}`"
            )))
        }
        None => {
            return Err(syntax(
                "expected a mechanism name after MASKED WITH or THEN",
            ))
        }
    };
    let mut params = serde_json::Map::new();
    if toks.peek() == Some(&Tok::Open) {
        toks.next();
        if toks.peek() == Some(&Tok::Close) {
            toks.next();
        } else {
            loop {
                let name = match toks.next() {
                    Some(Tok::Word(w)) => w.to_ascii_lowercase(),
                    Some(other) => {
                        return Err(syntax(format!(
                            "expected a parameter name, found `{other}`"
                        )))
                    }
                    None => return Err(syntax("unterminated parameter list")),
                };
                if toks.next() != Some(Tok::Arrow) {
                    return Err(syntax(format!("expected '=>' after {name}")));
                }
                let value = value_of(
                    toks.next()
                        .ok_or_else(|| syntax(format!("missing value for {name}")))?,
                    &name,
                )?;
                if params.insert(name.clone(), value).is_some() {
                    return Err(syntax(format!("{name} is given twice")));
                }
                match toks.next() {
                    Some(Tok::Comma) => continue,
                    Some(Tok::Close) => break,
                    _ => return Err(syntax("expected ',' or ')' in the parameter list")),
                }
            }
        }
    } else if let Some(t) = toks.peek() {
        if !matches!(t, Tok::Word(w) if w.eq_ignore_ascii_case("then")) {
            return Err(syntax(format!("expected '(' after {mechanism}")));
        }
    }
    if mechanism.eq_ignore_ascii_case("chain") {
        return Err(syntax("write a chain as m1(...) THEN m2(...)"));
    }
    MechanismSpec::parse(&mechanism, &serde_json::Value::Object(params))
}

/// Checks a role label: the only one is `MASKED`.
///
/// ```
/// use dptext_core::rules::check_role_label;
/// assert!(check_role_label(" masked ").is_ok());
/// assert!(check_role_label("MASKED WITH santext(eps => 3)").is_err());
/// ```
pub fn check_role_label(label: &str) -> Result<()> {
    if label.trim().eq_ignore_ascii_case("masked") {
        Ok(())
    } else {
        Err(Error::invalid(
            "label",
            format!("a role label must be 'MASKED', got '{label}'"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Errors quote the label as written, never Rust's debug form.
    #[test]
    fn errors_quote_the_label_not_rust_debug_text() {
        for (bad, want) in [
            ("MASKED santext(eps => 3)", "found `santext`"),
            ("MASKED WITH santext(eps 3)", "3"),
            ("MASKED WITH (eps => 3)", "found `(`"),
            ("MASKED WITH santext(eps => 3) extra", "`extra`"),
            ("MASKED WITH santext(eps => 3) ;", "`;`"),
        ] {
            let e = parse_column_label(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
            for debug in ["Word(", "Open", "Str(", "Num(", "Punct", "'\\''"] {
                assert!(!e.contains(debug), "{bad}: {e}");
            }
        }
    }
    use crate::mechanisms::custext;

    #[test]
    fn chains_parse_and_print_back() {
        let r = parse_column_label(
            "MASKED WITH deidentify(operators => 'DATE:shift') THEN santext_plus(eps => 3)",
        )
        .unwrap();
        match &r.spec {
            MechanismSpec::Chain(stages) => {
                assert_eq!(stages.len(), 2);
                assert_eq!(stages[1].name(), "santext_plus");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.mechanism(), "chain");
        let label = r.to_label();
        assert!(
            label.contains(") THEN santext_plus(embedding => 'glove', eps => 3.0"),
            "{label}"
        );
        assert_eq!(parse_column_label(&label).unwrap(), r);
        // The params round-trip through MechanismSpec::parse (what masking calls).
        assert_eq!(MechanismSpec::parse("chain", &r.params()).unwrap(), r.spec);
        for bad in [
            "MASKED WITH santext(eps => 3) THEN",
            "MASKED WITH santext(eps => 3) AND santext(eps => 2)",
            "MASKED WITH chain(stages => 'x')",
            "MASKED WITH a THEN b THEN c THEN d THEN e",
        ] {
            assert!(parse_column_label(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_mechanism_and_value_kind_parses() {
        let r = parse_column_label("masked with SANTEXT( eps=>3 )").unwrap();
        assert_eq!(
            r.params(),
            serde_json::json!({"eps": 3.0, "embedding": "glove"})
        );
        let r = parse_column_label(
            "MASKED WITH custext(eps => 1.5, k => 50, mapping => 'conservative', level => token, keep_stopwords => false)",
        )
        .unwrap();
        match r.spec {
            MechanismSpec::CusText(crate::mechanisms::CusTextSpec {
                eps,
                k,
                mapping,
                level,
                keep_stopwords,
                ..
            }) => {
                assert_eq!((eps, k, keep_stopwords), (1.5, 50, false));
                assert_eq!(mapping, custext::MappingStrategy::Conservative);
                assert_eq!(level, custext::Level::Token);
            }
            other => panic!("{other:?}"),
        }
        let r = parse_column_label("MASKED WITH deidentify").unwrap();
        assert_eq!(r.params()["strategy"], "full_entity");
        let r = parse_column_label("MASKED WITH deidentify(strategy => 'it''s', p => 1)");
        assert!(r.unwrap_err().to_string().contains("it's"));
    }

    #[test]
    fn bad_labels_say_what_is_wrong() {
        for (label, want) in [
            ("", "expected masked"),
            ("MASKED", "expected with"),
            ("MASKED WITH", "mechanism name"),
            ("MASKED WITH nope(eps => 1)", "unknown mechanism \"nope\""),
            ("MASKED WITH santext(eps => 0)", "must be > 0"),
            ("MASKED WITH santext(eps => nan)", "invalid type"),
            ("MASKED WITH santext", "missing field `eps`"),
            (
                "MASKED WITH santext(eps => 3, eps => 4)",
                "eps is given twice",
            ),
            ("MASKED WITH santext(eps = 3)", "not part of '=>'"),
            ("MASKED WITH santext(eps => 3", "expected ',' or ')'"),
            ("MASKED WITH santext(eps => 3) extra", "unexpected"),
            (
                "MASKED WITH santext(epsilon => 3)",
                "unknown field `epsilon`",
            ),
            ("MASKED WITH santext(eps => 'x", "unterminated string"),
            ("MASKED WITH santext(eps => 1e999)", "finite"),
            (
                "MASKED WITH santext(eps => 3; DROP TABLE t)",
                "unexpected character",
            ),
        ] {
            let err = parse_column_label(label).expect_err(label).to_string();
            assert!(err.contains(want), "{label}: {err}");
        }
    }

    #[test]
    fn to_label_round_trips() {
        for label in [
            "MASKED WITH santext(eps => 3)",
            "MASKED WITH santext_plus(eps => 2, p => 0.25, w => 0.5, embedding => wordpiece)",
            "MASKED WITH custext(eps => 1, k => 20, metric => cosine)",
            "MASKED WITH deidentify(strategy => typed_placeholder, p => 0.9)",
        ] {
            let rule = parse_column_label(label).unwrap();
            let again = parse_column_label(&rule.to_label()).unwrap();
            assert_eq!(rule, again, "{}", rule.to_label());
        }
    }

    #[test]
    fn grouped_by_names_the_date_shift_group_column() {
        let rule = parse_column_label(
            "MASKED WITH deidentify(operators => 'DATE:shift') GROUPED BY Patient_Id",
        )
        .unwrap();
        assert_eq!(rule.group_column.as_deref(), Some("patient_id"));
        let quoted = parse_column_label(
            "MASKED WITH deidentify(operators => 'DATE:shift') THEN santext_plus(eps => 3) grouped by 'Patient Id'",
        )
        .unwrap();
        assert_eq!(quoted.group_column.as_deref(), Some("Patient Id"));
        for r in [&rule, &quoted] {
            let again = parse_column_label(&r.to_label()).unwrap();
            assert_eq!(*r, again, "{}", r.to_label());
        }
        // Each row's group value reaches every deidentify stage.
        let spec = quoted.spec_for_row(Some("17"));
        let json = spec.params_json();
        assert_eq!(json["stages"][0]["params"]["group"], "17", "{json}");
        assert!(rule.spec_for_row(None).params_json().get("group").is_none());
        // A long value is hashed to fit.
        let long = "x".repeat(5000);
        let g = rule.spec_for_row(Some(&long)).params_json()["group"].clone();
        assert_eq!(g.as_str().map(str::len), Some(64));
        // Without GROUPED BY the row's value is ignored.
        let plain =
            parse_column_label("MASKED WITH deidentify(operators => 'DATE:shift')").unwrap();
        assert!(plain
            .spec_for_row(Some("17"))
            .params_json()
            .get("group")
            .is_none());
        for (label, want) in [
            (
                "MASKED WITH santext(eps => 3) GROUPED BY patient_id",
                "no deidentify stage",
            ),
            (
                "MASKED WITH deidentify(group => 'x') GROUPED BY patient_id",
                "not both",
            ),
            ("MASKED WITH deidentify() GROUPED patient_id", "expected by"),
            (
                "MASKED WITH deidentify() GROUPED BY",
                "column name after GROUPED BY",
            ),
            (
                "MASKED WITH deidentify() GROUPED BY a GROUPED BY b",
                "unexpected",
            ),
            (
                "MASKED WITH deidentify() GROUPED BY a THEN santext(eps => 3)",
                "unexpected",
            ),
        ] {
            let err = parse_column_label(label).expect_err(label).to_string();
            assert!(err.contains(want), "{label}: {err}");
        }
    }
}
