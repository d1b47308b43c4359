//! PostgreSQL protocol 3 framing and the few messages the proxy reads or
//! writes itself. Everything else is relayed byte for byte.

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::error::{ProxyError, Result};

/// One message: its type byte (0 for the untyped startup packets) and body.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Type byte.
    pub tag: u8,
    /// Body, without type and length.
    pub body: Vec<u8>,
}

impl Frame {
    /// A frame of `tag` with `body`.
    pub fn new(tag: u8, body: Vec<u8>) -> Self {
        Frame { tag, body }
    }

    /// The bytes on the wire.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.tag);
        out.put_i32((self.body.len() + 4) as i32);
        out.put_slice(&self.body);
    }

    /// The bytes on the wire, as a vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = BytesMut::with_capacity(self.body.len() + 5);
        self.encode(&mut b);
        b.to_vec()
    }
}

/// Reads one typed message; `None` at a clean end of stream.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> Result<Option<Frame>> {
    let tag = match r.read_u8().await {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let len = r.read_i32().await?;
    if len < 4 || len as usize - 4 > max {
        return Err(ProxyError::Protocol(format!(
            "message '{}' of {len} bytes (limit {max})",
            char::from(tag)
        )));
    }
    let mut body = vec![0; len as usize - 4];
    r.read_exact(&mut body).await?;
    Ok(Some(Frame { tag, body }))
}

/// Reads one untyped startup-phase packet (length, then body).
pub async fn read_startup<R: AsyncRead + Unpin>(r: &mut R) -> Result<Vec<u8>> {
    let len = r.read_i32().await?;
    if !(8..=10_000).contains(&len) {
        return Err(ProxyError::Protocol(format!(
            "startup packet of {len} bytes"
        )));
    }
    let mut body = vec![0; len as usize - 4];
    r.read_exact(&mut body).await?;
    Ok(body)
}

/// Appends a NUL-terminated string.
pub fn put_cstr(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// A cursor over a message body.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads `buf` from the start.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn short() -> ProxyError {
        ProxyError::Protocol("message too short".into())
    }

    /// A big-endian i16.
    pub fn i16(&mut self) -> Result<i16> {
        let b = self
            .buf
            .get(self.pos..self.pos + 2)
            .ok_or_else(Self::short)?;
        self.pos += 2;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    /// A big-endian i32.
    pub fn i32(&mut self) -> Result<i32> {
        let b = self
            .buf
            .get(self.pos..self.pos + 4)
            .ok_or_else(Self::short)?;
        self.pos += 4;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A byte.
    pub fn u8(&mut self) -> Result<u8> {
        let b = *self.buf.get(self.pos).ok_or_else(Self::short)?;
        self.pos += 1;
        Ok(b)
    }

    /// `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let b = self
            .buf
            .get(self.pos..self.pos + n)
            .ok_or_else(Self::short)?;
        self.pos += n;
        Ok(b)
    }

    /// A NUL-terminated string.
    pub fn cstr(&mut self) -> Result<&'a str> {
        let rest = self.buf.get(self.pos..).ok_or_else(Self::short)?;
        let end = rest.iter().position(|&b| b == 0).ok_or_else(Self::short)?;
        self.pos += end + 1;
        std::str::from_utf8(&rest[..end])
            .map_err(|_| ProxyError::Protocol("string is not UTF-8".into()))
    }

    /// Whether everything was read.
    pub fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

/// One column of a RowDescription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Column name.
    pub name: String,
    /// Source table OID (0 for an expression).
    pub table_oid: u32,
    /// Source attribute number (0 for an expression).
    pub attnum: i16,
    /// Type OID.
    pub type_oid: u32,
    /// 0 text, 1 binary.
    pub format: i16,
}

/// Parses a RowDescription body.
pub fn parse_row_description(body: &[u8]) -> Result<Vec<Column>> {
    let mut r = Reader::new(body);
    let n = r.i16()?;
    let mut cols = Vec::with_capacity(n.max(0) as usize);
    for _ in 0..n {
        let name = r.cstr()?.to_string();
        let table_oid = r.i32()? as u32;
        let attnum = r.i16()?;
        let type_oid = r.i32()? as u32;
        let _size = r.i16()?;
        let _modifier = r.i32()?;
        let format = r.i16()?;
        cols.push(Column {
            name,
            table_oid,
            attnum,
            type_oid,
            format,
        });
    }
    Ok(cols)
}

/// Parses a DataRow body into fields (`None` for NULL).
pub fn parse_data_row(body: &[u8]) -> Result<Vec<Option<&[u8]>>> {
    let mut r = Reader::new(body);
    let n = r.i16()?;
    let mut fields = Vec::with_capacity(n.max(0) as usize);
    for _ in 0..n {
        let len = r.i32()?;
        fields.push(if len < 0 {
            None
        } else {
            Some(r.bytes(len as usize)?)
        });
    }
    Ok(fields)
}

/// Builds a DataRow body.
pub fn data_row(fields: &[Option<Vec<u8>>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(fields.len() as i16).to_be_bytes());
    for f in fields {
        match f {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    out
}

/// The fields of an ErrorResponse or NoticeResponse.
pub fn parse_fields(body: &[u8]) -> Result<Vec<(u8, String)>> {
    let mut r = Reader::new(body);
    let mut out = Vec::new();
    loop {
        let code = r.u8()?;
        if code == 0 {
            break;
        }
        out.push((code, r.cstr()?.to_string()));
    }
    Ok(out)
}

/// Builds an ErrorResponse or NoticeResponse body from fields.
pub fn fields_body(fields: &[(u8, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (code, v) in fields {
        out.push(*code);
        put_cstr(&mut out, v);
    }
    out.push(0);
    out
}

/// An ErrorResponse frame.
pub fn error(severity: &str, sqlstate: &str, message: &str) -> Frame {
    Frame::new(
        b'E',
        fields_body(&[
            (b'S', severity.into()),
            (b'V', severity.into()),
            (b'C', sqlstate.into()),
            (b'M', message.into()),
        ]),
    )
}

/// An Authentication frame with a code and payload.
pub fn auth(code: i32, payload: &[u8]) -> Frame {
    let mut body = code.to_be_bytes().to_vec();
    body.extend_from_slice(payload);
    Frame::new(b'R', body)
}

/// A Describe frame for a portal.
pub fn describe_portal(portal: &str) -> Frame {
    let mut body = vec![b'P'];
    put_cstr(&mut body, portal);
    Frame::new(b'D', body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_rows_round_trip() {
        let fields = vec![Some(b"abc".to_vec()), None, Some(Vec::new())];
        let body = data_row(&fields);
        let back: Vec<Option<Vec<u8>>> = parse_data_row(&body)
            .unwrap()
            .into_iter()
            .map(|f| f.map(<[u8]>::to_vec))
            .collect();
        assert_eq!(back, fields);
        assert!(parse_data_row(&body[..body.len() - 1]).is_err());
    }

    #[test]
    fn error_fields_round_trip() {
        let f = error("ERROR", "42501", "no");
        let fields = parse_fields(&f.body).unwrap();
        assert_eq!(fields[2], (b'C', "42501".to_string()));
    }
}
