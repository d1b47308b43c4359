//! The rows of a result with protected columns, on their way through the
//! sanitizer, and the limits they are held to.
//!
//! Nothing a masked user can observe may depend on the lengths of raw
//! protected values. `limits.max_message_bytes` judged on a raw row would
//! end the session exactly when the row's raw length passes it, and a
//! padding column (`SELECT note, repeat('x', n)`) would turn that into
//! the exact length of the value. So a row that carries protected
//! columns is held to the limit as it would be sent, its protected
//! columns sanitized ([`check_sent`]). It is read field by field
//! ([`read_row`]): as soon as its other fields alone are over the limit,
//! the row cannot be sent whatever its protected values become, and the
//! session ends without reading the rest; otherwise it is read whole, up
//! to what PostgreSQL itself can send ([`SERVER_MAX_ROW`]). Rows are
//! sanitized in batches of `batch_rows` rows, counted, never weighed: a
//! batch sent once the raw rows held reached a size would arrive earlier
//! or later, and a value the sanitizer cannot take (over the engine's
//! limits) would lose a different set of rows, by the raw lengths of the
//! rows before it. So a session may hold `batch_rows` rows of up to what
//! PostgreSQL sends each; lower `batch_rows` to bound that.
//!
//! The server has a bound of its own: PostgreSQL fails a statement
//! whose row would pass 1 GiB, raw values and padding together (54000
//! `out of memory`), before the proxy sees the row. With a padding of
//! nearly 1 GiB, that error against the proxy's own limit would again
//! tell a raw length. So in a result with protected columns, any server
//! error ends the session exactly as a row over the limit does, in the
//! same words (the session's filter does this): not only the codes a
//! row too large to build is known to raise, since which error a
//! statement met, where the server held raw values, is the kind of bit
//! this module exists to withhold. What is left is the time either
//! takes: the server builds the row in both cases, and where it could,
//! the proxy ends the session once it has read the protected fields
//! before the padding.

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::error::{ProxyError, Result};
use crate::wire::Frame;

/// The largest message body PostgreSQL sends: it builds a DataRow in a
/// buffer that cannot grow past `MaxAllocSize` (1 GiB - 1), and fails the
/// statement (54000 `out of memory`) before sending a larger one.
pub const SERVER_MAX_ROW: usize = 0x3fff_ffff;

/// Room left in a row for what PostgreSQL adds to its values (the field
/// count and lengths, the message header) and for what is not a value.
const ROW_MARGIN: usize = 64 << 10;

/// The limit a result row with `protected` protected columns is held to,
/// as it would be sent: `limits.max_message_bytes` (`max`), lowered so
/// that any row the server cannot build is over it by its other fields
/// alone. The server fails a row whose raw values and other fields pass
/// 1 GiB ([`SERVER_MAX_ROW`]); the raw values take at most
/// `max_input_bytes` each (a longer one ends the session in the
/// sanitizer), so a row the server fails has other fields of more than
/// `SERVER_MAX_ROW - protected * max_input_bytes`, and [`read_row`]
/// refuses it on those alone, whatever its raw values: both outcomes end
/// the session alike. With a limit above that (a `max_message_bytes`
/// near 1 GiB) a padded row that fit would be sent and one that did not
/// would end the session: a raw length, one bit per ask. Zero when
/// `protected` columns of `max_input_bytes` could fill 1 GiB alone: no
/// such row is served.
pub fn protected_row_limit(max: usize, protected: usize, max_input_bytes: usize) -> usize {
    let raw = protected
        .saturating_mul(max_input_bytes)
        .saturating_add(ROW_MARGIN);
    max.min(SERVER_MAX_ROW.saturating_sub(raw))
}

/// Reads the body (`len` bytes, as its header declared) of a DataRow of
/// a result whose protected columns are those `protected` says, field by
/// field. `None` as soon as the row's framing and unprotected fields
/// alone are over `max` as sent: it cannot be sent, whatever its
/// protected values sanitize to, and that depends on no raw protected
/// length. `None` too for a protected value longer than `max_value` (the
/// engine's input limit), which the sanitizer could not take: the
/// session ends the same way for both, and for a row the server could
/// not build (which of them it was would tell a raw length, and with a
/// padding column the exact one). The rest of the row is then left
/// unread.
pub async fn read_row<R: AsyncRead + Unpin>(
    r: &mut R,
    len: usize,
    protected: impl Fn(usize) -> bool,
    max: usize,
    max_value: usize,
) -> Result<Option<Vec<u8>>> {
    if len > SERVER_MAX_ROW.max(max) {
        return Err(ProxyError::Protocol(format!(
            "a row of {len} bytes, more than PostgreSQL sends"
        )));
    }
    let short = || ProxyError::Protocol("a row shorter than its fields".into());
    // Reserved, not touched: pages are taken as the row is read.
    let mut body = Vec::with_capacity(len);
    let count = r.read_i16().await?;
    body.extend_from_slice(&count.to_be_bytes());
    let count = usize::try_from(count).map_err(|_| short())?;
    // What the row will be at least, as sent: its framing, its
    // unprotected fields.
    let mut sent = 2 + 4 * count;
    for i in 0..count {
        let field = r.read_i32().await?;
        body.extend_from_slice(&field.to_be_bytes());
        let Ok(field) = usize::try_from(field) else {
            continue;
        };
        if !protected(i) {
            sent = sent.saturating_add(field);
        } else if field > max_value {
            return Ok(None);
        }
        if sent > max {
            return Ok(None);
        }
        if body.len().saturating_add(field) > len {
            return Err(short());
        }
        let at = body.len();
        body.resize(at + field, 0);
        r.read_exact(&mut body[at..]).await?;
    }
    if body.len() != len {
        return Err(short());
    }
    Ok(Some(body))
}

/// `Err` (54000, naming the limit) when a row of `len` bytes, as it
/// would be sent, is over `max`.
pub fn check_sent(len: usize, max: usize) -> Result<()> {
    if len > max {
        return Err(ProxyError::protected_row_too_large(max));
    }
    Ok(())
}

/// Rows held for sanitizing together, counted (never weighed: see the
/// module's text).
#[derive(Debug)]
pub struct Batch {
    rows: Vec<Frame>,
    max_rows: usize,
}

impl Batch {
    /// An empty batch that is full at `max_rows` rows.
    pub fn new(max_rows: usize) -> Self {
        Batch {
            rows: Vec::new(),
            max_rows: max_rows.max(1),
        }
    }

    /// Holds `row`.
    pub fn push(&mut self, row: Frame) {
        self.rows.push(row);
    }

    /// Whether it is time to sanitize and send the rows held.
    pub fn full(&self) -> bool {
        self.rows.len() >= self.max_rows
    }

    /// Whether no row is held.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows held, leaving the batch empty.
    pub fn take(&mut self) -> Vec<Frame> {
        std::mem::take(&mut self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire;

    /// A row of fields `fields`, its body's length, read with column 0
    /// protected and a limit of `max`.
    async fn read(fields: &[Option<&[u8]>], max: usize) -> Result<Option<Vec<u8>>> {
        let body = wire::data_row(fields);
        let mut r: &[u8] = &body;
        read_row(&mut r, body.len(), |i| i == 0, max, 1 << 20).await
    }

    #[tokio::test]
    async fn protected_rows_are_judged_by_their_other_fields_only() {
        let long = vec![b'n'; 5000];
        let pad = vec![b'x'; 900];
        // A protected value far over the limit, raw, is read whole.
        let fields = [Some(&long[..]), Some(&pad[..]), None];
        let got = read(&fields, 1024).await.ok().flatten();
        assert_eq!(got, Some(wire::data_row(&fields)));
        // Unprotected fields over the limit alone: refused, whatever the
        // protected value's length.
        for note in [&b""[..], &b"short"[..], &long[..]] {
            let fields = [Some(note), Some(&pad[..]), Some(&pad[..])];
            assert!(matches!(read(&fields, 1024).await, Ok(None)));
        }
        // A body that does not match its fields is an error.
        let body = wire::data_row(&[Some(&b"abc"[..])]);
        let mut r: &[u8] = &body;
        assert!(read_row(&mut r, body.len() + 1, |_| true, 1024, 1024)
            .await
            .is_err());
        let mut r: &[u8] = &body;
        assert!(read_row(&mut r, body.len() - 1, |_| true, 1024, 1024)
            .await
            .is_err());
        // A protected value over the input limit: refused before it is
        // read, as a row over the limit is.
        let fields = [Some(&long[..]), Some(&b"x"[..])];
        let body = wire::data_row(&fields);
        let mut r: &[u8] = &body;
        assert!(matches!(
            read_row(&mut r, body.len(), |i| i == 0, 1 << 20, 4999).await,
            Ok(None)
        ));
        let mut r: &[u8] = &body;
        assert!(read_row(&mut r, body.len(), |i| i == 0, 1 << 20, 5000)
            .await
            .is_ok_and(|b| b.is_some()));
    }

    #[test]
    fn the_limit_applies_to_the_row_as_sent() {
        assert!(check_sent(1024, 1024).is_ok());
        let e = check_sent(1025, 1024)
            .err()
            .map(|e| (e.sqlstate(), e.to_string()));
        assert!(
            e.as_ref().is_some_and(
                |(s, m)| *s == "54000" && m.contains("limits.max_message_bytes (1024)")
            ),
            "{e:?}"
        );
    }

    #[test]
    fn a_batch_is_full_by_its_rows_whatever_their_size() {
        let mut b = Batch::new(3);
        b.push(Frame::new(b'D', vec![0; 10]));
        b.push(Frame::new(b'D', vec![0; 1 << 20]));
        assert!(!b.full());
        b.push(Frame::new(b'D', vec![0; 10]));
        assert!(b.full());
        assert_eq!(b.take().len(), 3);
        assert!(b.is_empty() && !b.full());
    }

    #[test]
    fn the_row_limit_leaves_room_for_every_raw_value() {
        let mib = 1 << 20;
        // Defaults: 64 MiB rows, 64 MiB inputs: the configured limit.
        assert_eq!(protected_row_limit(64 * mib, 1, 64 * mib), 64 * mib);
        // A limit of 1 GiB is lowered below what one raw value could fill.
        let one = protected_row_limit(1 << 30, 1, 64 * mib);
        assert!(one + 64 * mib < SERVER_MAX_ROW, "{one}");
        // Three protected columns lower it further.
        let three = protected_row_limit(1 << 30, 3, 64 * mib);
        assert_eq!(one - three, 128 * mib);
        // Sixteen of 64 MiB fill 1 GiB: nothing is served.
        assert_eq!(protected_row_limit(1 << 30, 16, 64 * mib), 0);
    }
}
