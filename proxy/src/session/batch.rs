//! The rows of a result with protected columns, on their way through the
//! sanitizer, and the limits they are held to.
//!
//! Nothing a masked user can observe may depend on the lengths of raw
//! protected values. `limits.max_message_bytes` judged on a raw row would
//! end the session exactly when the row's raw length passes it, and a
//! padding column (`SELECT note, repeat('x', n)`) would turn that into
//! the exact length of the value. So a row that carries protected
//! columns is read whole up to what PostgreSQL itself can send
//! ([`SERVER_MAX_ROW`]), and the limit applies to the row as it would be
//! sent, its protected columns sanitized ([`check_sent`]). Rows are
//! sanitized in batches of `batch_rows` rows, sent earlier when the rows
//! held reach `max_message_bytes` (so that memory stays bounded); that
//! changes when rows arrive, as the time sanitizing takes does, and
//! nothing else.
//!
//! What is left is the server's own bound: PostgreSQL fails a statement
//! whose row would pass 1 GiB, raw values and padding together, before
//! the proxy sees the row. Probing it takes rows of a gigabyte, and it
//! tells the length only of values so long that their repeats in one
//! row (at most 1664 columns) can reach it.

use crate::error::{ProxyError, Result};
use crate::wire::Frame;

/// The largest message body PostgreSQL sends: it builds a DataRow in a
/// buffer that cannot grow past `MaxAllocSize` (1 GiB - 1), and fails the
/// statement (54000 `out of memory`) before sending a larger one.
pub const SERVER_MAX_ROW: usize = 0x3fff_ffff;

/// The largest body a server message of `tag` may declare: `max` (the
/// configured limit), but for the DataRows of a result with protected
/// columns, which are judged once sanitized ([`check_sent`]).
pub fn read_limit(tag: u8, protected: bool, max: usize) -> usize {
    if tag == b'D' && protected {
        SERVER_MAX_ROW.max(max)
    } else {
        max
    }
}

/// `Err` (54000, naming the limit) when a row of `len` bytes, as it
/// would be sent, is over `max`.
pub fn check_sent(len: usize, max: usize) -> Result<()> {
    if len > max {
        return Err(ProxyError::sanitized_row_too_large(len, max));
    }
    Ok(())
}

/// Rows held for sanitizing together.
#[derive(Debug)]
pub struct Batch {
    rows: Vec<Frame>,
    bytes: usize,
    max_rows: usize,
    max_bytes: usize,
}

impl Batch {
    /// An empty batch that is full at `max_rows` rows or `max_bytes`
    /// bytes of raw rows.
    pub fn new(max_rows: usize, max_bytes: usize) -> Self {
        Batch {
            rows: Vec::new(),
            bytes: 0,
            max_rows: max_rows.max(1),
            max_bytes,
        }
    }

    /// Holds `row`.
    pub fn push(&mut self, row: Frame) {
        self.bytes = self.bytes.saturating_add(row.body.len());
        self.rows.push(row);
    }

    /// Whether it is time to sanitize and send the rows held.
    pub fn full(&self) -> bool {
        self.rows.len() >= self.max_rows || self.bytes >= self.max_bytes
    }

    /// Whether no row is held.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows held, leaving the batch empty.
    pub fn take(&mut self) -> Vec<Frame> {
        self.bytes = 0;
        std::mem::take(&mut self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_rows_are_read_up_to_what_the_server_sends() {
        assert_eq!(read_limit(b'D', true, 1024), SERVER_MAX_ROW);
        assert_eq!(read_limit(b'D', false, 1024), 1024);
        assert_eq!(read_limit(b'T', true, 1024), 1024);
        assert_eq!(read_limit(b'E', true, 1024), 1024);
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
    fn a_batch_is_full_by_rows_or_by_bytes() {
        let mut b = Batch::new(3, 100);
        b.push(Frame::new(b'D', vec![0; 10]));
        b.push(Frame::new(b'D', vec![0; 10]));
        assert!(!b.full());
        b.push(Frame::new(b'D', vec![0; 10]));
        assert!(b.full());
        assert_eq!(b.take().len(), 3);
        assert!(b.is_empty() && !b.full());
        b.push(Frame::new(b'D', vec![0; 100]));
        assert!(b.full());
    }
}
