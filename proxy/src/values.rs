//! Sanitizing one value of a result column, in its type and wire format.
//!
//! Text types (text, varchar, bpchar, name, xml, unknown) are sanitized
//! whole, in text and binary format alike (both are the UTF-8 text). JSON
//! and JSONB have every string sanitized, and every key the caller does not
//! keep (the proxy keeps keys that are column names in the catalog). Arrays of these, in text or binary format, have each
//! element sanitized. Anything else that reaches here (a record, a
//! tsvector, ...) in text format is sanitized as one string; in binary
//! format it is refused, since its structure cannot be kept.

use crate::error::{ProxyError, Result};

/// What a type is to the masking rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Text-like scalar.
    Text,
    /// json.
    Json,
    /// jsonb.
    Jsonb,
    /// An array of text-like or JSON elements (the element type's OID).
    Array(u32),
    /// Types whose values cannot carry text (numbers, booleans, times, ...).
    Safe,
    /// bytea: raw bytes, never sanitizable.
    Bytes,
    /// Any other type (records, composites, tsvector, ...).
    Other,
}

/// The kind of a type OID.
pub fn kind(oid: u32) -> Kind {
    match oid {
        25 | 1043 | 1042 | 19 | 142 | 705 | 18 => Kind::Text,
        114 => Kind::Json,
        3802 => Kind::Jsonb,
        1009 => Kind::Array(25),
        1015 => Kind::Array(1043),
        1014 => Kind::Array(1042),
        1003 => Kind::Array(19),
        143 => Kind::Array(142),
        199 => Kind::Array(114),
        3807 => Kind::Array(3802),
        // bool, int2/4/8, oid, float4/8, numeric, money, date, time(tz),
        // timestamp(tz), interval, uuid, and their arrays.
        16 | 20 | 21 | 23 | 26 | 700 | 701 | 1700 | 790 | 1082 | 1083 | 1266 | 1114 | 1184
        | 1186 | 2950 | 1000 | 1005 | 1007 | 1016 | 1021 | 1022 | 1231 | 1182 | 1115 | 1185 => {
            Kind::Safe
        }
        17 => Kind::Bytes,
        _ => Kind::Other,
    }
}

/// What a string is inside its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Text content.
    Text,
    /// A JSON object key (the caller may keep keys that are column names).
    Key,
}

/// A sanitizer of one string.
pub type Sanitize<'a> = dyn FnMut(&str, Part) -> Result<String> + 'a;

fn utf8(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Sanitizes one non-NULL value of type `oid` in `format` (0 text, 1 binary).
pub fn sanitize_value(
    oid: u32,
    format: i16,
    value: &[u8],
    f: &mut Sanitize<'_>,
) -> Result<Vec<u8>> {
    match (kind(oid), format) {
        (Kind::Text, _) => Ok(f(&utf8(value), Part::Text)?.into_bytes()),
        (Kind::Json, _) => Ok(json(&utf8(value), f)?.into_bytes()),
        (Kind::Jsonb, 0) => Ok(json(&utf8(value), f)?.into_bytes()),
        (Kind::Jsonb, _) => {
            // Version byte 1, then the JSON text.
            let (v, rest) = value
                .split_first()
                .ok_or_else(|| ProxyError::Protocol("empty jsonb value".into()))?;
            let mut out = vec![*v];
            out.extend(json(&utf8(rest), f)?.into_bytes());
            Ok(out)
        }
        (Kind::Array(elem), 0) => Ok(text_array(&utf8(value), elem, f)?.into_bytes()),
        (Kind::Array(_), _) => binary_array(value, f),
        (Kind::Safe, _) => Ok(value.to_vec()),
        (Kind::Other, 0) => Ok(f(&utf8(value), Part::Text)?.into_bytes()),
        (Kind::Bytes | Kind::Other, _) => Err(ProxyError::Protocol(format!(
            "values of type oid {oid} in binary format cannot be sanitized"
        ))),
    }
}

fn json(text: &str, f: &mut Sanitize<'_>) -> Result<String> {
    fn walk(v: serde_json::Value, f: &mut Sanitize<'_>) -> Result<serde_json::Value> {
        use serde_json::Value;
        Ok(match v {
            Value::String(s) => Value::String(f(&s, Part::Text)?),
            Value::Array(a) => {
                Value::Array(a.into_iter().map(|x| walk(x, f)).collect::<Result<_>>()?)
            }
            Value::Object(o) => {
                let mut m = serde_json::Map::new();
                for (k, x) in o {
                    let k = f(&k, Part::Key)?;
                    m.insert(k, walk(x, f)?);
                }
                Value::Object(m)
            }
            other => other,
        })
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => Ok(walk(v, f)?.to_string()),
        // Not JSON after all: the whole text is one string.
        Err(_) => f(text, Part::Text),
    }
}

/// A text-format array literal with each element sanitized; elements are
/// always written quoted.
fn text_array(text: &str, elem: u32, f: &mut Sanitize<'_>) -> Result<String> {
    if !text.starts_with('{') {
        // Dimension decorations ([1:2]={...}) and anything unexpected: one string.
        return f(text, Part::Text);
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '{' | '}' | ',' => {
                out.push(chars[i]);
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '"' => {
                let mut s = String::new();
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    s.push(chars[i]);
                    i += 1;
                }
                i += 1;
                push_quoted(&mut out, &element(&s, elem, f)?);
            }
            _ => {
                let start = i;
                while i < chars.len() && !matches!(chars[i], ',' | '}') {
                    i += 1;
                }
                let raw: String = chars[start..i].iter().collect();
                let raw = raw.trim();
                if raw.eq_ignore_ascii_case("null") {
                    out.push_str("NULL");
                } else {
                    push_quoted(&mut out, &element(raw, elem, f)?);
                }
            }
        }
    }
    Ok(out)
}

fn element(s: &str, elem: u32, f: &mut Sanitize<'_>) -> Result<String> {
    match kind(elem) {
        Kind::Json | Kind::Jsonb => json(s, f),
        _ => f(s, Part::Text),
    }
}

fn push_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// A binary-format array with each element sanitized.
fn binary_array(value: &[u8], f: &mut Sanitize<'_>) -> Result<Vec<u8>> {
    let mut r = crate::wire::Reader::new(value);
    let ndim = r.i32()?;
    let flags = r.i32()?;
    let elem = r.i32()? as u32;
    if !(0..=6).contains(&ndim) {
        return Err(ProxyError::Protocol(format!(
            "array with {ndim} dimensions"
        )));
    }
    let mut out = Vec::with_capacity(value.len());
    for v in [ndim, flags, elem as i32] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    let mut count: i64 = 1;
    for _ in 0..ndim {
        let size = r.i32()?;
        let lbound = r.i32()?;
        count *= i64::from(size.max(0));
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(&lbound.to_be_bytes());
    }
    if ndim == 0 {
        count = 0;
    }
    for _ in 0..count {
        let len = r.i32()?;
        if len < 0 {
            out.extend_from_slice(&(-1i32).to_be_bytes());
            continue;
        }
        let v = sanitize_value(elem, 1, r.bytes(len as usize)?, f)?;
        out.extend_from_slice(&(v.len() as i32).to_be_bytes());
        out.extend_from_slice(&v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upper-cases text in brackets; keeps keys that are all lower case.
    fn upper(s: &str, part: Part) -> Result<String> {
        if part == Part::Key && s.chars().all(|c| c.is_ascii_lowercase()) {
            return Ok(s.to_string());
        }
        Ok(format!("<{}>", s.to_uppercase()))
    }

    fn run(oid: u32, format: i16, v: &[u8]) -> String {
        String::from_utf8(sanitize_value(oid, format, v, &mut upper).unwrap()).unwrap()
    }

    #[test]
    fn text_json_and_arrays() {
        assert_eq!(run(25, 0, b"jane doe"), "<JANE DOE>");
        assert_eq!(run(1043, 1, b"jane"), "<JANE>");
        assert_eq!(
            run(
                114,
                0,
                br#"{"note": "jane doe", "n": 3, "Jane": ["x", null]}"#
            ),
            r#"{"<JANE>":["<X>",null],"n":3,"note":"<JANE DOE>"}"#
        );
        assert_eq!(run(3802, 1, b"\x01\"jane\""), "\u{1}\"<JANE>\"");
        assert_eq!(
            run(1009, 0, br#"{jane,"doe, \"jr\"",NULL}"#),
            r#"{"<JANE>","<DOE, \"JR\">",NULL}"#
        );
        assert_eq!(
            run(1009, 0, b"{{a,b},{c,d}}"),
            r#"{{"<A>","<B>"},{"<C>","<D>"}}"#
        );
        assert_eq!(run(23, 1, b"\0\0\0\x07"), "\0\0\0\x07");
        assert_eq!(run(2249, 0, b"(1,jane)"), "<(1,JANE)>");
        assert!(sanitize_value(2249, 1, b"xx", &mut upper).is_err());
        assert!(sanitize_value(17, 1, b"xx", &mut upper).is_err());
    }

    #[test]
    fn binary_text_arrays() {
        // 1 dimension, no nulls flag, element text (25), size 2, lbound 1.
        let mut v = Vec::new();
        for x in [1i32, 1, 25, 2, 1] {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v.extend_from_slice(&4i32.to_be_bytes());
        v.extend_from_slice(b"jane");
        v.extend_from_slice(&(-1i32).to_be_bytes());
        let out = sanitize_value(1009, 1, &v, &mut upper).unwrap();
        assert_eq!(&out[20..24], &6i32.to_be_bytes());
        assert_eq!(&out[24..30], b"<JANE>");
        assert_eq!(&out[30..34], &(-1i32).to_be_bytes());
        assert!(sanitize_value(1009, 1, &v[..22], &mut upper).is_err());
    }
}
