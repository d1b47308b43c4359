//! One JSON line: find the sanitized fields' values and splice new ones in,
//! leaving every other byte of the line (key order, spacing, escapes,
//! numbers) as it came.
//!
//! The line is read as an ordered list of (key, raw value) pairs whose raw
//! values borrow from the line, so their byte ranges are known; no
//! `serde_json::Value` (a sorted map) is ever built from it.

use std::fmt;

use anyhow::{bail, Context, Result};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The top-level object of a line, in input order.
pub struct Entries<'a>(pub Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = map.next_key::<String>()? {
                    out.push((k, map.next_value::<&'de RawValue>()?));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Where one field's value sits in the line, and its text.
#[derive(Debug)]
pub struct Found {
    /// Byte range of the raw value in the line.
    pub range: std::ops::Range<usize>,
    /// The string, or `None` for JSON null (passed through as null).
    pub text: Option<String>,
}

/// Parses `line` (line number `n`, from 1) and finds each of `fields`.
/// Fails on a line that is not an object, a field that is absent, given
/// twice, or neither a string nor null.
pub fn find(line: &str, n: usize, fields: &[&str]) -> Result<Vec<Found>> {
    let entries: Entries =
        serde_json::from_str(line).with_context(|| format!("line {n}: not a JSON object"))?;
    let mut found = Vec::with_capacity(fields.len());
    for &field in fields {
        let mut hits = entries.0.iter().filter(|(k, _)| k == field);
        let Some((_, raw)) = hits.next() else {
            let keys: Vec<&str> = entries.0.iter().map(|(k, _)| k.as_str()).collect();
            bail!(
                "line {n}: no field {field:?} (the line has {}): refusing to pass the line through unsanitized",
                if keys.is_empty() {
                    "no fields".to_string()
                } else {
                    keys.join(", ")
                }
            );
        };
        if hits.next().is_some() {
            bail!("line {n}: field {field:?} appears more than once");
        }
        let text = raw.get();
        let start = offset_in(line, text)
            .with_context(|| format!("line {n}: cannot locate field {field:?}"))?;
        let value = match text.as_bytes().first() {
            Some(b'"') => Some(
                serde_json::from_str::<String>(text)
                    .with_context(|| format!("line {n}: field {field:?}"))?,
            ),
            Some(b'n') => None,
            other => bail!(
                "line {n}: field {field:?} is {} and not a string: refusing to pass it through",
                match other {
                    Some(b'[') => "an array",
                    Some(b'{') => "an object",
                    Some(b't' | b'f') => "a boolean",
                    _ => "a number",
                }
            ),
        };
        found.push(Found {
            range: start..start + text.len(),
            text: value,
        });
    }
    Ok(found)
}

/// The byte offset of `part` inside `whole`, when it borrows from it.
fn offset_in(whole: &str, part: &str) -> Option<usize> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    (start + part.len() <= whole.len()).then_some(start)
}

/// The keys of a line, to refuse cost keys that would overwrite input.
pub fn has_key(line: &str, key: &str) -> bool {
    serde_json::from_str::<Entries>(line).is_ok_and(|e| e.0.iter().any(|(k, _)| k == key))
}

/// `line` with each range replaced, and `extra` (`"key":value` pairs, already
/// encoded) appended before the closing brace.
pub fn splice(
    line: &str,
    replace: &[(std::ops::Range<usize>, String)],
    extra: &[String],
) -> Result<String> {
    let mut sorted: Vec<&(std::ops::Range<usize>, String)> = replace.iter().collect();
    sorted.sort_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(line.len() + 64);
    let mut at = 0;
    for (r, new) in sorted {
        out.push_str(&line[at..r.start]);
        out.push_str(new);
        at = r.end;
    }
    out.push_str(&line[at..]);
    if extra.is_empty() {
        return Ok(out);
    }
    let close = out
        .rfind('}')
        .context("a JSON object without its closing brace")?;
    let empty = out[..close].trim_end().ends_with('{');
    let mut tail = String::new();
    for (i, e) in extra.iter().enumerate() {
        if i > 0 || !empty {
            tail.push(',');
        }
        tail.push_str(e);
    }
    out.insert_str(close, &tail);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_bytes_stay_and_values_are_spliced() {
        let line = r#"{ "z": 1.50, "text" : "a \"b\"", "a": {"y": [1, 2]}, "n": null }"#;
        let f = find(line, 1, &["text", "n"]).unwrap();
        assert_eq!(f[0].text.as_deref(), Some("a \"b\""));
        assert_eq!(&line[f[0].range.clone()], r#""a \"b\"""#);
        assert_eq!(f[1].text, None);
        let out = splice(
            line,
            &[(f[0].range.clone(), "\"X\"".into())],
            &["\"text_cost\":{}".into()],
        )
        .unwrap();
        assert_eq!(
            out,
            r#"{ "z": 1.50, "text" : "X", "a": {"y": [1, 2]}, "n": null ,"text_cost":{}}"#
        );
        assert_eq!(splice("{}", &[], &["\"k\":1".into()]).unwrap(), "{\"k\":1}");
    }

    #[test]
    fn absent_duplicate_and_non_string_fields_are_errors() {
        let e = find(r#"{"id": 1, "note": "x"}"#, 7, &["nte"]).unwrap_err();
        assert!(format!("{e:#}").contains("line 7: no field \"nte\" (the line has id, note)"));
        assert!(find(r#"{"t": "a", "t": "b"}"#, 1, &["t"]).is_err());
        assert!(find(r#"{"t": 3}"#, 1, &["t"]).is_err());
        assert!(find(r#"{"t": ["a"]}"#, 1, &["t"]).is_err());
        assert!(find(r#"["t"]"#, 1, &["t"]).is_err());
    }
}
