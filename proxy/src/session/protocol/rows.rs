//! The pure halves of sanitizing a batch of rows: the values the
//! sanitizer takes, and the rows as sent once it gave them back (the
//! sanitizer itself runs on its pool, between the two, in the I/O loop).

use std::sync::Arc;

use crate::error::{ProxyError, Result};
use crate::session::batch;
use crate::wire::{self, Frame};

use super::columns::Protected;
use super::tags::BackendTag;

/// The fields of one DataRow (`None` for NULL).
pub type Fields<'a> = Vec<Option<&'a [u8]>>;

/// The rows' fields, each row parsed once.
pub fn parse(rows: &[Frame]) -> Result<Vec<Fields<'_>>> {
    rows.iter()
        .map(|row| wire::parse_data_row(&row.body))
        .collect()
}

/// The (rule, value) of every non-NULL protected field, row by row, in
/// column order: what the sanitizer takes, in the order [`rebuild`] puts
/// its outputs back.
pub fn inputs(rows: &[Fields<'_>], protected: &Protected) -> Result<Vec<(Arc<str>, String)>> {
    let mut items = Vec::new();
    for fields in rows {
        for (i, rule) in protected {
            if let Some(Some(v)) = fields.get(*i) {
                let text = std::str::from_utf8(v).map_err(|_| {
                    ProxyError::Protocol(
                        "a protected value is not UTF-8 text: proxy mode needs client_encoding UTF8"
                            .into(),
                    )
                })?;
                items.push((rule.clone(), text.to_owned()));
            }
        }
    }
    Ok(items)
}

/// The fields of the DataRows to send: each row with its protected values
/// replaced by `outputs` (in the order of [`inputs`]), borrowed from the
/// rows and the outputs, so that the caller builds and writes one row at a
/// time ([`wire::data_row`]) instead of holding the whole batch a second
/// time. `None` when any row, as sent, is over `limit`: none of the batch
/// is sent then, so that a row over the limit loses its batch as every
/// other ending of a protected result does. Every row is judged before any
/// is sent.
pub fn rebuild<'a>(
    rows: &[Fields<'a>],
    protected: &Protected,
    outputs: &'a [String],
    limit: usize,
) -> Result<Option<Vec<Fields<'a>>>> {
    let mut out = outputs.iter();
    let is_protected = |i: usize| protected.iter().any(|(p, _)| *p == i);
    let mut sent_rows = Vec::with_capacity(rows.len());
    for fields in rows {
        let mut sent = Vec::with_capacity(fields.len());
        for (i, field) in fields.iter().enumerate() {
            sent.push(match field {
                Some(_) if is_protected(i) => Some(
                    out.next()
                        .ok_or_else(|| {
                            ProxyError::Protocol("the sanitizer returned too few values".into())
                        })?
                        .as_bytes(),
                ),
                other => *other,
            });
        }
        if batch::check_sent(wire::data_row_len(&sent), limit).is_err() {
            return Ok(None);
        }
        sent_rows.push(sent);
    }
    Ok(Some(sent_rows))
}

/// One DataRow to send, of the fields [`rebuild`] gave.
pub fn frame(fields: &[Option<&[u8]>]) -> Frame {
    Frame::new(BackendTag::DataRow.byte(), wire::data_row(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(fields: &[Option<&str>]) -> Frame {
        let fields: Vec<Option<&[u8]>> = fields.iter().map(|f| f.map(str::as_bytes)).collect();
        Frame::new(b'D', wire::data_row(&fields))
    }

    #[test]
    fn protected_values_go_out_and_come_back_in_column_order() {
        let protected: Protected = vec![(1, Arc::from("r1")), (2, Arc::from("r2"))];
        let rows = [
            row(&[Some("1"), Some("a"), Some("b")]),
            row(&[Some("2"), None, Some("c")]),
        ];
        let parsed = parse(&rows).unwrap();
        let items = inputs(&parsed, &protected).unwrap();
        let values: Vec<(&str, &str)> = items.iter().map(|(r, v)| (&**r, v.as_str())).collect();
        assert_eq!(values, [("r1", "a"), ("r2", "b"), ("r2", "c")]);
        let outputs = vec!["A".into(), "B".into(), "C".into()];
        let sent = rebuild(&parsed, &protected, &outputs, 1024)
            .unwrap()
            .unwrap();
        assert_eq!(
            frame(&sent[0]).body,
            row(&[Some("1"), Some("A"), Some("B")]).body
        );
        assert_eq!(
            frame(&sent[1]).body,
            row(&[Some("2"), None, Some("C")]).body
        );
    }

    #[test]
    fn one_row_over_the_limit_as_sent_loses_the_whole_batch() {
        let protected: Protected = vec![(0, Arc::from("r"))];
        let rows = [row(&[Some("short")]), row(&[Some("x")])];
        let parsed = parse(&rows).unwrap();
        // Raw, the second row is small; sanitized, it is over.
        let outputs = vec!["s".into(), "y".repeat(100)];
        assert!(rebuild(&parsed, &protected, &outputs, 50)
            .unwrap()
            .is_none());
        let outputs = vec!["s".into()];
        assert!(rebuild(&parsed, &protected, &outputs, 50).is_err());
    }

    #[test]
    fn protected_values_must_be_utf8() {
        let protected: Protected = vec![(0, Arc::from("r"))];
        let rows = [Frame::new(b'D', wire::data_row(&[Some(&[0xff][..])]))];
        let parsed = parse(&rows).unwrap();
        assert!(inputs(&parsed, &protected).is_err());
    }
}
