//! `deidentify`'s parameters: the default replacement strategy, an
//! operator per label (`{"PERSON": "full_entity", "DATE": "shift", "ID":
//! "redact"}`), whole-value replacement, date shifting and its grouping
//! value. One definition, read by SQL, the CLI, rules and the proxy.

use crate::cost::Guarantee;
use crate::detect::Label;
use crate::error::{Error, Result};
use crate::mechanisms::check_unit;
use crate::mechanisms::replace::{lemma_eps, strategy_min_pi, ReplaceStrategy};

/// What `deidentify` does to the spans of one label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// Replace with probability `p` by a surrogate of the strategy.
    Replace(ReplaceStrategy),
    /// Move every date of the value by the same number of days (DATE only;
    /// outside the lemma's guarantee).
    Shift,
    /// Leave the spans as they are (the label is not sensitive in this column).
    Keep,
}

impl std::str::FromStr for Operator {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "shift" => Operator::Shift,
            "keep" => Operator::Keep,
            other => Operator::Replace(other.parse().map_err(|_| {
                Error::invalid(
                    "operators",
                    format!("\"{other}\" is not one of 'redact', 'typed_placeholder', 'named_placeholder', 'word_by_word', 'full_entity', 'shift', 'keep'"),
                )
            })?),
        })
    }
}

impl Operator {
    /// The name used in SQL.
    pub fn name(self) -> &'static str {
        match self {
            Operator::Replace(s) => s.name(),
            Operator::Shift => "shift",
            Operator::Keep => "keep",
        }
    }
}

/// An operator for some labels; the others follow the default strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Operators([Option<Operator>; 7]);

impl Operators {
    /// Reads `{"PERSON": "full_entity", "DATE": "shift"}` or its compact
    /// string form `PERSON:full_entity,DATE:shift` (what rules write; `;`
    /// separates as well, for the CLI), or that object as JSON text; an
    /// empty string or object is no override.
    pub fn parse(v: &serde_json::Value) -> Result<Self> {
        let mut ops = Operators::default();
        let mut set = |label: &str, op: &str| -> Result<()> {
            let l: Label = label.trim().to_ascii_uppercase().parse().map_err(|_| {
                Error::invalid(
                    "operators",
                    format!("unknown label {label:?}; the labels are PERSON, LOCATION, ORGANIZATION, DATE, AGE, CONTACT, ID"),
                )
            })?;
            let op: Operator = op.parse()?;
            if op == Operator::Shift && l != Label::Date {
                return Err(Error::invalid(
                    "operators",
                    format!("'shift' applies to DATE only, not {}", l.as_str()),
                ));
            }
            ops.0[l.index()] = Some(op);
            Ok(())
        };
        match v {
            serde_json::Value::Null => {}
            serde_json::Value::String(s) if s.trim_start().starts_with('{') => {
                let v: serde_json::Value = serde_json::from_str(s)
                    .map_err(|e| Error::invalid("operators", format!("not JSON: {e}")))?;
                return Operators::parse(&v);
            }
            serde_json::Value::String(s) => {
                // `;` as well as `,`: the CLI's `--field` syntax splits on commas.
                for pair in s.split([',', ';']).map(str::trim).filter(|p| !p.is_empty()) {
                    let (l, o) = pair.split_once(':').ok_or_else(|| {
                        Error::invalid("operators", format!("{pair:?} is not LABEL:operator"))
                    })?;
                    set(l, o)?;
                }
            }
            serde_json::Value::Object(m) => {
                for (l, o) in m {
                    let o = o.as_str().ok_or_else(|| {
                        Error::invalid("operators", format!("the operator of {l} must be a string"))
                    })?;
                    set(l, o)?;
                }
            }
            other => {
                return Err(Error::invalid(
                    "operators",
                    format!("must be an object or a 'LABEL:operator,...' string, got {other}"),
                ))
            }
        }
        Ok(ops)
    }

    /// The override of `label`, if any.
    pub fn get(&self, label: Label) -> Option<Operator> {
        self.0[label.index()]
    }

    /// Whether no label has an override.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }

    /// `PERSON:full_entity,DATE:shift` in label order (empty when none).
    pub fn canonical(&self) -> String {
        Label::ALL
            .iter()
            .filter_map(|&l| self.get(l).map(|o| format!("{}:{}", l.as_str(), o.name())))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Largest date shift, in days (about 100 years).
pub const MAX_SHIFT_DAYS: u32 = 36_500;
/// Longest grouping value accepted, in bytes.
pub const MAX_GROUP_BYTES: usize = 1024;

/// Every parameter of `deidentify`.
#[derive(Debug, Clone, PartialEq)]
pub struct DeidentifySpec {
    /// The strategy of every label without an operator of its own.
    pub strategy: ReplaceStrategy,
    /// Replacement probability, in [0, 1].
    pub p: f64,
    /// Same original, same surrogate within a value (voids the lemma).
    pub consistent: bool,
    /// Per-label operators.
    pub operators: Operators,
    /// The whole value is one PERSON span, detected or not (name columns).
    pub whole: bool,
    /// Dates shift by a non-zero number of days in `[-shift_days, shift_days]`.
    pub shift_days: u32,
    /// The value that fixes the shift under a key (a patient id): every
    /// value of a group moves by the same number of days.
    pub group: Option<String>,
}

/// `deidentify`'s JSON keys and their defaults.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DeidentifyParams {
    #[serde(default)]
    strategy: Option<String>,
    #[serde(default = "default_p")]
    p: f64,
    #[serde(default)]
    consistent: bool,
    #[serde(default)]
    operators: serde_json::Value,
    #[serde(default)]
    whole: bool,
    #[serde(default = "default_shift_days")]
    shift_days: i64,
    #[serde(default)]
    group: Option<String>,
}

fn default_p() -> f64 {
    1.0
}

fn default_shift_days() -> i64 {
    365
}

impl DeidentifySpec {
    /// The spec of `deidentify`'s JSON parameters (not yet validated):
    /// strategy `full_entity`, `p` 1, no operators, `shift_days` 365.
    pub(in crate::mechanisms) fn parse(params: &serde_json::Value) -> Result<Self> {
        let p: DeidentifyParams = crate::mechanisms::params::read(params)?;
        Ok(DeidentifySpec {
            strategy: p.strategy.as_deref().unwrap_or("full_entity").parse()?,
            p: p.p,
            consistent: p.consistent,
            operators: Operators::parse(&p.operators)?,
            whole: p.whole,
            shift_days: u32::try_from(p.shift_days).unwrap_or(0),
            group: p.group,
        })
    }

    /// `strategy` for every label, `p = 1`, nothing else.
    pub fn new(strategy: ReplaceStrategy) -> Self {
        DeidentifySpec {
            strategy,
            p: 1.0,
            consistent: false,
            operators: Operators::default(),
            whole: false,
            shift_days: 365,
            group: None,
        }
    }

    /// Checks every parameter's domain.
    pub fn validate(&self) -> Result<()> {
        check_unit("p", self.p)?;
        if !(1..=MAX_SHIFT_DAYS).contains(&self.shift_days) {
            return Err(Error::invalid(
                "shift_days",
                format!("must be in [1, {MAX_SHIFT_DAYS}], got {}", self.shift_days),
            ));
        }
        if self
            .group
            .as_ref()
            .is_some_and(|g| g.len() > MAX_GROUP_BYTES)
        {
            return Err(Error::invalid(
                "group",
                format!("longer than {MAX_GROUP_BYTES} bytes"),
            ));
        }
        Ok(())
    }

    /// The operator of `label`.
    pub fn operator(&self, label: Label) -> Operator {
        self.operators
            .get(label)
            .unwrap_or(Operator::Replace(self.strategy))
    }

    /// The canonical parameter string that keys randomness: the same as
    /// before operators existed when none is set, so keyed outputs of
    /// older rules do not change. The grouping value is not in it (it only
    /// keys the date shift).
    pub fn key_params(&self) -> String {
        let mut s = format!(
            "strategy={};p={:?};consistent={}",
            self.strategy.name(),
            self.p,
            self.consistent
        );
        if !self.operators.is_empty() {
            s.push_str(&format!(";operators={}", self.operators.canonical()));
        }
        if self.whole {
            s.push_str(";whole=true");
        }
        if self.shift_days != 365 {
            s.push_str(&format!(";shift_days={}", self.shift_days));
        }
        s
    }

    /// The parameters as the JSON object `MechanismSpec::parse` accepts.
    pub fn params_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "strategy": self.strategy.name(),
            "p": self.p,
            "consistent": self.consistent,
        });
        if let Some(m) = v.as_object_mut() {
            if !self.operators.is_empty() {
                m.insert("operators".into(), self.operators.canonical().into());
            }
            if self.whole {
                m.insert("whole".into(), true.into());
            }
            if self.shift_days != 365 {
                m.insert("shift_days".into(), self.shift_days.into());
            }
            if let Some(g) = &self.group {
                m.insert("group".into(), g.clone().into());
            }
        }
        v
    }

    /// What a whole-value rule (`whole => true`) rests on, in words: what
    /// of the value can pass, given its PERSON operator, `p` and whether
    /// replacement is consistent.
    pub fn whole_rests_on(&self) -> String {
        match self.operator(Label::Person) {
            Operator::Keep => {
                return "the whole value kept as it is (PERSON => keep): nothing is replaced".into()
            }
            Operator::Shift => {
                return "the whole value read as a date and shifted (PERSON => shift): its intervals pass".into()
            }
            Operator::Replace(_) => {}
        }
        let mut s = String::from(
            "the whole value, its spacing included, replaced by a surrogate: no detection involved",
        );
        if self.p < 1.0 {
            s.push_str("; with probability 1 - p the value passes unchanged");
        }
        if self.consistent {
            s.push_str("; consistent replacement draws the surrogate from the value under the key, so equal values get equal surrogates (which rows share a value shows)");
        } else if self.p >= 1.0 {
            s.push_str("; drawn independently of the value, so nothing of it passes");
        }
        s
    }

    /// The per-span guarantee before any text is seen: the lemma's eps
    /// over the strategies in use, none when a label is shifted or kept or
    /// replacement is consistent.
    pub fn guarantee(&self) -> Result<Guarantee> {
        if self.consistent {
            return Ok(Guarantee::None {
                reason:
                    "consistent replacement depends on the original value: the lemma does not apply"
                        .to_string(),
            });
        }
        let labels: Vec<Label> = if self.whole {
            vec![Label::Person]
        } else {
            Label::ALL.to_vec()
        };
        let outside: Vec<&str> = labels
            .iter()
            .filter(|&&l| matches!(self.operator(l), Operator::Shift | Operator::Keep))
            .map(|l| l.as_str())
            .collect();
        if !outside.is_empty() {
            return Ok(Guarantee::None {
                reason: format!(
                    "{} shifted or kept: date shifting keeps intervals and kept spans are released as they are, outside the lemma (the other labels' eps is in the cost's labels)",
                    outside.join(", ")
                ),
            });
        }
        check_unit("p", self.p)?;
        let min_pi = labels
            .iter()
            .filter_map(|&l| match self.operator(l) {
                Operator::Replace(s) => Some(strategy_min_pi(s)),
                _ => None,
            })
            .fold(1.0, f64::min);
        Ok(Guarantee::Replacement {
            eps: lemma_eps(self.p, min_pi),
            p: self.p,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_values_say_what_can_pass() {
        let mut s = DeidentifySpec::new(ReplaceStrategy::FullEntity);
        s.whole = true;
        assert!(s.whole_rests_on().contains("nothing of it passes"));
        s.p = 0.9;
        assert!(s.whole_rests_on().contains("passes unchanged"));
        assert!(!s.whole_rests_on().contains("nothing of it passes"));
        s.p = 1.0;
        s.consistent = true;
        assert!(s
            .whole_rests_on()
            .contains("equal values get equal surrogates"));
    }

    #[test]
    fn operators_read_both_forms_and_refuse_nonsense() {
        let a =
            Operators::parse(&json!({"PERSON": "full_entity", "DATE": "shift", "id": "redact"}))
                .unwrap();
        let b = Operators::parse(&json!("DATE:shift, ID:redact,PERSON:full_entity")).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            Operators::parse(&json!("DATE:shift;ID:redact;PERSON:full_entity")).unwrap(),
            a
        );
        assert_eq!(a.canonical(), "PERSON:full_entity,DATE:shift,ID:redact");
        assert_eq!(Operators::parse(&json!(a.canonical())).unwrap(), a);
        for bad in [
            json!({"PERSON": "shift"}),
            json!({"NAME": "redact"}),
            json!("PERSON"),
            json!({"DATE": "blur"}),
            json!(3),
        ] {
            assert!(Operators::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keyed_parameters_are_unchanged_without_operators() {
        let s = DeidentifySpec::new(ReplaceStrategy::FullEntity);
        assert_eq!(
            s.key_params(),
            "strategy=full_entity;p=1.0;consistent=false"
        );
        let mut t = s.clone();
        t.group = Some("patient 7".into());
        assert_eq!(t.key_params(), s.key_params());
        t.whole = true;
        assert_ne!(t.key_params(), s.key_params());
    }

    #[test]
    fn guarantee_names_what_is_outside_the_lemma() {
        let mut s = DeidentifySpec::new(ReplaceStrategy::FullEntity);
        s.p = 0.9;
        assert!(matches!(
            s.guarantee().unwrap(),
            Guarantee::Replacement { .. }
        ));
        s.operators = Operators::parse(&json!({"DATE": "shift"})).unwrap();
        match s.guarantee().unwrap() {
            Guarantee::None { reason } => assert!(reason.contains("DATE"), "{reason}"),
            g => panic!("{g:?}"),
        }
        s.shift_days = 0;
        assert!(s.validate().is_err());
    }
}
