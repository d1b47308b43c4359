//! What proxy mode lets through of the server's errors and notices: the
//! severity, the SQLSTATE and a message that cannot quote data.
//!
//! Every other field goes (detail, hint, context, position, internal
//! query, schema, table, column, type and constraint names, file, line,
//! routine): detail and context quote values, the rest is of no use to a
//! masked user. The message stays only for SQLSTATE classes whose messages
//! name objects and settings, never values: feature not supported (0A),
//! invalid transaction state (25), invalid cursor or statement names (26,
//! 34), invalid catalog or schema names (3D, 3F), transaction rollback
//! (40), syntax error or access rule violation (42), insufficient
//! resources (53), program limits (54), object state (55), operator
//! intervention (57) and connection exceptions (08). Any other class, data
//! exceptions (22) first among them, whose messages quote values, gets a
//! fixed message naming its SQLSTATE.

use crate::error::Result;
use crate::wire::{self, Frame};

/// SQLSTATE classes whose messages name objects, never values.
const MESSAGE_KEPT: [&str; 13] = [
    "0A", "25", "26", "34", "3D", "3F", "40", "42", "53", "54", "55", "57", "08",
];

/// The fields of an ErrorResponse or NoticeResponse body as proxy mode
/// relays them.
pub fn scrub(tag: u8, body: &[u8]) -> Result<Frame> {
    let fields = wire::parse_fields(body)?;
    let get = |code: u8| {
        fields
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, v)| v.clone())
    };
    let severity = get(b'S').unwrap_or_else(|| "ERROR".into());
    let sqlstate = get(b'C').unwrap_or_else(|| "XX000".into());
    let keep = sqlstate.len() == 5 && MESSAGE_KEPT.iter().any(|c| sqlstate.starts_with(c));
    let message = match get(b'M') {
        Some(m) if keep => m,
        _ => format!(
            "the server reported SQLSTATE {sqlstate}; dptext-proxy withholds its message in proxy mode (it may quote data)"
        ),
    };
    let mut out = vec![(b'S', severity)];
    if let Some(v) = get(b'V') {
        out.push((b'V', v));
    }
    out.push((b'C', sqlstate));
    out.push((b'M', message));
    Ok(Frame::new(tag, wire::fields_body(&out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(f: &Frame) -> Vec<(u8, String)> {
        wire::parse_fields(&f.body).unwrap_or_default()
    }

    #[test]
    fn data_exceptions_lose_their_message_and_every_extra_field() {
        let body = wire::fields_body(&[
            (b'S', "ERROR".into()),
            (b'V', "ERROR".into()),
            (b'C', "22P02".into()),
            (
                b'M',
                "invalid input syntax for type integer: \"Maria Lopez\"".into(),
            ),
            (b'D', "Maria Lopez".into()),
            (b'W', "SQL function x".into()),
            (b't', "records".into()),
        ]);
        let f = scrub(b'E', &body).unwrap_or_else(|e| panic!("{e}"));
        let text = format!("{:?}", fields(&f));
        assert!(!text.contains("Maria"), "{text}");
        assert!(text.contains("22P02"), "{text}");
        assert_eq!(fields(&f).len(), 4, "{text}");
    }

    #[test]
    fn access_errors_keep_their_message() {
        let body = wire::fields_body(&[
            (b'S', "ERROR".into()),
            (b'C', "42501".into()),
            (b'M', "permission denied for table secrets".into()),
            (b'H', "ask someone".into()),
        ]);
        let f = scrub(b'N', &body).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.tag, b'N');
        let m: Vec<_> = fields(&f);
        assert!(m.contains(&(b'M', "permission denied for table secrets".into())));
        assert!(!m.iter().any(|(c, _)| *c == b'H'));
    }
}
