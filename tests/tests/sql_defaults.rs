//! The extension's dedicated SQL functions (`santext`, `santext_plus`,
//! `custext`, `deidentify`, `ndd_distort`, `ndd`) write their parameters'
//! defaults as `default!(...)` literals, because SQL defaults are part of
//! a function's declaration. This test reads them from the extension's
//! source and fails when one differs from the mechanism spec's default, so
//! that `MechanismSpec` stays the one place that defines a default.
//! (tests/sql/functions.sql checks the same on the installed functions.)

use dptext_core::mechanisms::MechanismSpec;
use serde_json::{json, Value};

const LIB: &str = include_str!("../../extension/src/lib.rs");

/// (SQL function, its mechanism, the parameters it requires).
fn functions() -> [(&'static str, &'static str, Value); 6] {
    [
        ("santext", "santext", json!({"eps": 1})),
        ("santext_plus", "santext_plus", json!({"eps": 1})),
        ("custext", "custext", json!({"eps": 1})),
        ("deidentify", "deidentify", json!({})),
        ("ndd_distort", "ndd", json!({})),
        // The NDD score itself: its mu and divergence are NDD's.
        ("ndd", "ndd", json!({})),
    ]
}

/// The mechanism parameter an SQL argument sets (`group` is a reserved
/// word in SQL).
fn parameter(argument: &str) -> &str {
    match argument {
        "grp" => "group",
        a => a,
    }
}

/// The `default!` arguments of `fn name(...)` in the extension's source:
/// (argument, value as JSON; `None` for SQL NULL).
fn sql_defaults(name: &str) -> Vec<(String, Option<Value>)> {
    let head = format!("\nfn {name}(");
    let start = LIB
        .find(&head)
        .unwrap_or_else(|| panic!("no fn {name} in extension/src/lib.rs"))
        + head.len();
    let end = start
        + LIB[start..]
            .find("\n) ->")
            .unwrap_or_else(|| panic!("fn {name}: no end of its arguments"));
    LIB[start..end]
        .lines()
        .filter_map(|line| {
            let (argument, rest) = line.trim().split_once(": default!(")?;
            let (_, value) = rest
                .trim_end_matches(',')
                .trim_end_matches(')')
                .split_once(", ")?;
            Some((argument.to_string(), sql_value(value)))
        })
        .collect()
}

/// A `default!` value as JSON: a Rust literal (`0.3`, `20`, `true`) or a
/// string of SQL (`"'glove'"`); `None` for `"NULL"` and for `"''"`, which
/// the functions use for "none" where NULL would make them non-STRICT
/// (`vocabulary => ''`).
fn sql_value(value: &str) -> Option<Value> {
    let Some(sql) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return Some(serde_json::from_str(value).unwrap_or_else(|e| panic!("{value}: {e}")));
    };
    if sql == "NULL" {
        return None;
    }
    let text = sql
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .unwrap_or_else(|| panic!("{sql}: not an SQL string literal"));
    Some(text)
        .filter(|t| !t.is_empty())
        .map(|t| Value::String(t.replace("''", "'")))
}

#[test]
fn dedicated_functions_default_to_the_specs_defaults() {
    for (function, mechanism, required) in functions() {
        let defaults = sql_defaults(function);
        assert!(!defaults.is_empty(), "fn {function}: no default! found");
        let mut params = required.clone();
        for (argument, value) in &defaults {
            if let Some(v) = value {
                params[parameter(argument)] = v.clone();
            }
        }
        let spec = MechanismSpec::parse(mechanism, &required).unwrap();
        let sql = MechanismSpec::parse(mechanism, &params).unwrap_or_else(|e| {
            panic!("{function}'s SQL defaults are not {mechanism} parameters: {e}")
        });
        assert_eq!(
            sql.params_json(),
            spec.params_json(),
            "{function}'s SQL defaults ({defaults:?}) differ from {mechanism}'s spec"
        );
        assert_eq!(sql, spec, "{function}");
    }
}

#[test]
fn sql_default_values_read_as_json() {
    assert_eq!(sql_value("0.3"), Some(json!(0.3)));
    assert_eq!(sql_value("true"), Some(json!(true)));
    assert_eq!(sql_value("\"'glove'\""), Some(json!("glove")));
    assert_eq!(sql_value("\"''\""), None);
    assert_eq!(sql_value("\"NULL\""), None);
    let santext_plus = sql_defaults("santext_plus");
    assert!(
        santext_plus.contains(&("p".to_string(), Some(json!(0.3)))),
        "{santext_plus:?}"
    );
}
