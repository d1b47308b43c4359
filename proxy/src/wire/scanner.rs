//! Message boundaries in a relayed stream, fed in chunks, for database
//! mode's relay (`crate::session::relay`), which forwards bytes as they
//! come and never holds a whole message.

use crate::error::ProxyError;

/// Follows the message boundaries of one direction of a relayed stream,
/// fed in chunks as they arrive: it reads each message's five header
/// bytes and skips its body.
#[derive(Debug, Default)]
pub struct Scanner {
    header: [u8; 5],
    have: usize,
    remaining: usize,
}

/// A message header that [`Scanner::feed`] refused: a length below 4 or a
/// body over the limit. The stream cannot be followed past it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLength {
    /// The message's type byte.
    pub tag: u8,
    /// Its declared length (type byte excluded, as on the wire).
    pub len: i32,
    /// The limit on bodies.
    pub max: usize,
    /// Where its header starts in the chunk that completed it; `None` when
    /// the header began in an earlier chunk (in [`Scanner::partial_header`]
    /// before that chunk was fed).
    pub header_at: Option<usize>,
}

impl From<BadLength> for ProxyError {
    fn from(b: BadLength) -> Self {
        ProxyError::Protocol(format!(
            "message '{}' of {} bytes (limit {})",
            char::from(b.tag),
            b.len,
            b.max
        ))
    }
}

impl Scanner {
    /// Feeds the next `chunk`, calling `on_message(tag, body length)` at
    /// each message header it completes. A length below 4, or a body over
    /// `max` bytes, is a [`BadLength`] (the stream cannot be followed
    /// further).
    pub fn feed(
        &mut self,
        chunk: &[u8],
        max: usize,
        mut on_message: impl FnMut(u8, usize),
    ) -> std::result::Result<(), BadLength> {
        let mut i = 0;
        while i < chunk.len() {
            if self.remaining > 0 {
                let take = self.remaining.min(chunk.len() - i);
                self.remaining -= take;
                i += take;
                continue;
            }
            self.header[self.have] = chunk[i];
            self.have += 1;
            i += 1;
            if self.have == self.header.len() {
                self.have = 0;
                let tag = self.header[0];
                let len = i32::from_be_bytes([
                    self.header[1],
                    self.header[2],
                    self.header[3],
                    self.header[4],
                ]);
                if len < 4 || len as usize - 4 > max {
                    return Err(BadLength {
                        tag,
                        len,
                        max,
                        header_at: i.checked_sub(self.header.len()),
                    });
                }
                self.remaining = len as usize - 4;
                on_message(tag, self.remaining);
            }
        }
        Ok(())
    }

    /// Whether everything fed so far ends at a message boundary.
    pub fn at_boundary(&self) -> bool {
        self.have == 0 && self.remaining == 0
    }

    /// The first bytes of a header that the stream fed so far ends with
    /// (empty when it ends in a body or at a boundary).
    pub fn partial_header(&self) -> &[u8] {
        &self.header[..self.have]
    }

    /// Whether the stream fed so far ends inside a message body.
    pub fn in_body(&self) -> bool {
        self.remaining > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Frame;

    #[test]
    fn the_scanner_finds_every_message_however_the_stream_is_cut() {
        let mut stream = Vec::new();
        for (tag, body) in [(b'T', vec![1u8; 300]), (b'D', vec![]), (b'Z', vec![b'I'])] {
            stream.extend_from_slice(&Frame::new(tag, body).to_bytes());
        }
        for cut in 1..stream.len() {
            let mut sc = Scanner::default();
            let mut seen = Vec::new();
            for chunk in stream.chunks(cut) {
                sc.feed(chunk, 1000, |t, n| seen.push((t, n))).unwrap();
            }
            assert_eq!(
                seen,
                vec![(b'T', 300), (b'D', 0), (b'Z', 1)],
                "chunks of {cut}"
            );
            assert!(sc.at_boundary());
        }
        let mut sc = Scanner::default();
        sc.feed(&stream[..7], 1000, |_, _| {}).unwrap();
        assert!(!sc.at_boundary());
        let mut sc = Scanner::default();
        let e = sc.feed(&stream, 100, |_, _| {}).unwrap_err();
        assert_eq!((e.tag, e.header_at), (b'T', Some(0)));
        assert!(ProxyError::from(e).to_string().contains("limit 100"));
        // Where the refused message's header starts, wherever the stream
        // is cut: the relay forwards exactly the bytes before it.
        let mut stream = Frame::new(b'D', vec![]).to_bytes();
        stream.extend_from_slice(&Frame::new(b'Z', vec![b'I']).to_bytes());
        let at = stream.len();
        stream.extend_from_slice(&Frame::new(b'T', vec![1u8; 300]).to_bytes());
        for cut in 1..stream.len() {
            let mut sc = Scanner::default();
            let mut fed = 0;
            let mut found = None;
            for chunk in stream.chunks(cut) {
                let held = sc.partial_header().len();
                if let Err(e) = sc.feed(chunk, 200, |_, _| {}) {
                    found = Some(match e.header_at {
                        Some(i) => fed + i,
                        None => fed - held,
                    });
                    break;
                }
                fed += chunk.len();
            }
            assert_eq!(found, Some(at), "chunks of {cut}");
        }
        let mut sc = Scanner::default();
        assert!(sc.feed(&[b'Q', 0, 0, 0, 3], 100, |_, _| {}).is_err());
    }
}
