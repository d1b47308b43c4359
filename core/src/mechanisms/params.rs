//! Mechanism parameters as JSON text, read with errors that name the
//! parameter.
//!
//! JSON that PostgreSQL's `jsonb` and other producers accept can still be
//! out of reach of `serde_json`'s `Value`: numbers beyond the `f64` range
//! (`{"eps": 1e400}`) and documents nested deeper than 128 levels. Such a
//! document is an invalid parameter, named when it is the value of a
//! top-level key.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeOwned, DeserializeSeed, MapAccess, Visitor};

use crate::error::{Error, Result};

/// Every parameter name of every mechanism: an error names the parameter
/// when its key is one of these.
const NAMES: [&str; 21] = [
    "eps",
    "p",
    "w",
    "k",
    "mapping",
    "metric",
    "level",
    "keep_stopwords",
    "embedding",
    "strategy",
    "consistent",
    "mode",
    "candidates",
    "mu",
    "divergence",
    "vocabulary",
    "operators",
    "whole",
    "shift_days",
    "group",
    "stages",
];

/// Parses mechanism parameters from JSON text. Numbers beyond the `f64`
/// range and nesting deeper than 128 levels are invalid parameters, named
/// by their top-level key.
///
/// ```
/// use dptext_core::mechanisms::parse_params;
/// assert_eq!(parse_params(r#"{"eps": 3}"#).unwrap()["eps"], 3);
/// let e = parse_params(r#"{"eps": 1e400}"#).unwrap_err();
/// assert!(e.to_string().starts_with("invalid value for parameter \"eps\": number out of range"), "{e}");
/// ```
pub fn parse_params(text: &str) -> Result<serde_json::Value> {
    let first = match serde_json::from_str(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    // Which top-level key's value failed: read the object again, key by key.
    let key = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let located = LastKey(&key).deserialize(&mut de).is_err();
    let reason = reason(&first);
    match key.into_inner().filter(|_| located) {
        Some(k) => match NAMES.iter().find(|n| **n == k) {
            Some(name) => Err(Error::invalid(name, reason)),
            None => Err(Error::invalid("params", format!("\"{k}\": {reason}"))),
        },
        None => Err(Error::invalid("params", reason)),
    }
}

/// The error's message without its position, in words a user reads.
fn reason(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let msg = msg
        .split(" at line ")
        .next()
        .unwrap_or(msg.as_str())
        .to_string();
    if msg.contains("number out of range") {
        "number out of range (beyond about 1.8e308)".to_string()
    } else if msg.contains("recursion limit exceeded") {
        "nested more than 128 levels deep".to_string()
    } else {
        msg
    }
}

/// Reads a JSON object, remembering the key whose value it read last.
struct LastKey<'a>(&'a RefCell<Option<String>>);

impl<'de> DeserializeSeed<'de> for LastKey<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LastKey<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(k) = map.next_key::<String>()? {
            *self.0.borrow_mut() = Some(k);
            map.next_value::<serde_json::Value>()?;
        }
        Ok(())
    }
}

/// Reads a mechanism's JSON parameters into its `serde` struct; a key the
/// struct does not know, a missing required key or a value of the wrong
/// JSON type is an invalid `params`.
pub(super) fn read<T: DeserializeOwned>(params: &serde_json::Value) -> Result<T> {
    serde_json::from_value(params.clone()).map_err(|e| Error::invalid("params", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> String {
        parse_params(text).unwrap_err().to_string()
    }

    #[test]
    fn out_of_range_numbers_name_their_parameter() {
        let big = format!("{{\"p\": 0.3, \"eps\": 1{}}}", "0".repeat(400));
        assert!(
            message(&big).starts_with("invalid value for parameter \"eps\": number out of range"),
            "{}",
            message(&big)
        );
        assert!(message(r#"{"eps": -1e400}"#).contains("parameter \"eps\""));
        assert!(message(r#"{"zzz": 1e400}"#)
            .starts_with("invalid value for parameter \"params\": \"zzz\": number out of range"));
    }

    #[test]
    fn deep_nesting_is_an_invalid_parameter() {
        let deep = format!("{{\"k\": {}1{}}}", "[".repeat(200), "]".repeat(200));
        assert!(
            message(&deep).starts_with("invalid value for parameter \"k\": nested more than 128"),
            "{}",
            message(&deep)
        );
        let top = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(message(&top).starts_with("invalid value for parameter \"params\": nested"));
    }

    #[test]
    fn ordinary_documents_parse() {
        let v = parse_params(r#"{"eps": 3, "embedding": "glove"}"#).unwrap();
        assert_eq!(v["embedding"], "glove");
        assert!(message("{").starts_with("invalid value for parameter \"params\": EOF"));
    }

    #[test]
    fn every_parameter_of_every_mechanism_is_named() {
        // Every key a spec writes, optional ones set, must be in NAMES, so
        // that an out-of-range value names its parameter: a new parameter
        // without its name here fails this test.
        use crate::mechanisms::MechanismSpec;
        let specs = [
            ("santext", serde_json::json!({"eps": 3, "vocabulary": "v"})),
            (
                "santext_plus",
                serde_json::json!({"eps": 3, "vocabulary": "v"}),
            ),
            ("custext", serde_json::json!({"eps": 3, "vocabulary": "v"})),
            (
                "deidentify",
                serde_json::json!({"operators": "DATE:shift", "group": "g"}),
            ),
            ("ndd", serde_json::json!({})),
            (
                "chain",
                serde_json::json!({"stages": [{"mechanism": "deidentify", "params": {}},
                                              {"mechanism": "santext", "params": {"eps": 3}}]}),
            ),
        ];
        for (name, params) in specs {
            let spec = MechanismSpec::parse(name, &params).unwrap();
            let json = spec.params_json();
            for key in json.as_object().unwrap().keys() {
                assert!(
                    NAMES.contains(&key.as_str()),
                    "{name}: {key} is not in NAMES"
                );
            }
        }
    }
}
