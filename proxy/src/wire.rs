//! PostgreSQL protocol 3 framing, and the bodies of the messages the
//! proxy reads or writes itself (proxy mode's state machine reads them
//! only through these parsers). Everything else is relayed byte for
//! byte; [`Scanner`] (in `scanner`) follows message boundaries in the
//! relayed bytes without copying them.

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::{ProxyError, Result};

mod scanner;
pub use scanner::{BadLength, Scanner};

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

    /// The type byte and length that go before the body on the wire.
    pub fn header(&self) -> [u8; 5] {
        let mut h = [self.tag, 0, 0, 0, 0];
        h[1..].copy_from_slice(&((self.body.len() + 4) as i32).to_be_bytes());
        h
    }

    /// The bytes on the wire, as a vector (one copy of the body).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.body.len() + 5);
        b.extend_from_slice(&self.header());
        b.extend_from_slice(&self.body);
        b
    }
}

/// Reads one typed message; `None` at a clean end of stream.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> Result<Option<Frame>> {
    match read_header(r).await? {
        Some((tag, len)) => Ok(Some(read_body(r, tag, len, max).await?)),
        None => Ok(None),
    }
}

/// Reads the header of one typed message: its type byte and the length
/// of its body; `None` at a clean end of stream.
pub async fn read_header<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<(u8, usize)>> {
    match read_tag(r).await? {
        Some(tag) => Ok(Some((tag, read_length(r, tag).await?))),
        None => Ok(None),
    }
}

/// Reads the type byte of one typed message; `None` at a clean end of
/// stream. Cancel-safe (one byte is read or none is), so that a relay can
/// wait for it and for something else at once.
pub async fn read_tag<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<u8>> {
    match r.read_u8().await {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads the length of a message of `tag` whose type byte was read
/// ([`read_tag`]): the length of its body.
pub async fn read_length<R: AsyncRead + Unpin>(r: &mut R, tag: u8) -> Result<usize> {
    let len = r.read_i32().await?;
    match usize::try_from(len).ok().and_then(|l| l.checked_sub(4)) {
        Some(body) => Ok(body),
        None => Err(ProxyError::Protocol(format!(
            "message '{}' of {len} bytes",
            char::from(tag)
        ))),
    }
}

/// Reads the body (`len` bytes, from [`read_header`]) of a message of
/// `tag`, refused before any of it is read when over `max`.
pub async fn read_body<R: AsyncRead + Unpin>(
    r: &mut R,
    tag: u8,
    len: usize,
    max: usize,
) -> Result<Frame> {
    if len > max {
        return Err(ProxyError::Protocol(format!(
            "message '{}' of {} bytes (limit {max})",
            char::from(tag),
            len + 4
        )));
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).await?;
    Ok(Frame { tag, body })
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

/// The code of an SSLRequest (clients' and the proxy's own).
pub const SSL_REQUEST: i32 = 80_877_103;
/// The code of a GSSENCRequest.
pub const GSSENC_REQUEST: i32 = 80_877_104;
/// The code of a CancelRequest.
pub const CANCEL_REQUEST: i32 = 80_877_102;
/// Protocol version 3.0, as a StartupMessage carries it.
pub const PROTOCOL_3: i32 = 196_608;

/// An SSLRequest: length 8, then the request code.
pub fn ssl_request() -> [u8; 8] {
    let mut req = [0u8; 8];
    req[..4].copy_from_slice(&8i32.to_be_bytes());
    req[4..].copy_from_slice(&SSL_REQUEST.to_be_bytes());
    req
}

/// A CancelRequest for backend `pid` with `secret`: length 16, the
/// request code, the process id, the secret key.
pub fn cancel_request(pid: i32, secret: i32) -> [u8; 16] {
    let mut req = [0u8; 16];
    req[..4].copy_from_slice(&16i32.to_be_bytes());
    req[4..8].copy_from_slice(&CANCEL_REQUEST.to_be_bytes());
    req[8..12].copy_from_slice(&pid.to_be_bytes());
    req[12..].copy_from_slice(&secret.to_be_bytes());
    req
}

/// The (process id, secret key) of a CancelRequest, from the body that
/// [`read_startup`] returns (code included).
pub fn parse_cancel_request(body: &[u8]) -> Result<(i32, i32)> {
    let mut r = Reader::new(body);
    if r.i32()? != CANCEL_REQUEST {
        return Err(ProxyError::Protocol("not a cancel request".into()));
    }
    let key = (r.i32()?, r.i32()?);
    if !r.done() {
        return Err(ProxyError::Protocol(
            "cancel request of the wrong length".into(),
        ));
    }
    Ok(key)
}

/// A BackendKeyData frame.
pub fn backend_key_data(pid: i32, secret: i32) -> Frame {
    let mut body = pid.to_be_bytes().to_vec();
    body.extend_from_slice(&secret.to_be_bytes());
    Frame::new(b'K', body)
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

/// The length of the body of a DataRow of `fields` (`None` for NULL).
pub fn data_row_len(fields: &[Option<&[u8]>]) -> usize {
    2 + fields
        .iter()
        .map(|f| 4 + f.map_or(0, <[u8]>::len))
        .sum::<usize>()
}

/// The body of a DataRow of `fields` (`None` for NULL).
pub fn data_row(fields: &[Option<&[u8]>]) -> Vec<u8> {
    let mut body = Vec::with_capacity(data_row_len(fields));
    body.extend_from_slice(&(fields.len() as i16).to_be_bytes());
    for f in fields {
        match f {
            None => body.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(v) => {
                body.extend_from_slice(&(v.len() as i32).to_be_bytes());
                body.extend_from_slice(v);
            }
        }
    }
    body
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

/// The parameters of a StartupMessage body (after its version code), in
/// order.
pub fn parse_startup_params(body: &[u8]) -> Result<Vec<(String, String)>> {
    let mut r = Reader::new(body);
    let mut params = Vec::new();
    while !r.done() {
        let k = r.cstr()?;
        if k.is_empty() {
            break;
        }
        params.push((k.to_string(), r.cstr()?.to_string()));
    }
    Ok(params)
}

/// A client's `Query`: the SQL string.
pub fn parse_query(body: &[u8]) -> Result<&str> {
    Reader::new(body).cstr()
}

/// A `Query` frame of `sql`.
pub fn query(sql: &str) -> Frame {
    let mut body = Vec::with_capacity(sql.len() + 1);
    put_cstr(&mut body, sql);
    Frame::new(b'Q', body)
}

/// A client's `Parse`, as proxy mode reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseMessage<'a> {
    /// The statement name (empty: the unnamed statement).
    pub name: &'a str,
    /// The statement's SQL.
    pub sql: &'a str,
    /// What follows the two strings: the parameter types as sent.
    pub rest: &'a [u8],
}

impl ParseMessage<'_> {
    /// The parameter type OIDs the client names (0: the server infers),
    /// read one at a time: an error where the message ends early.
    pub fn param_types(&self) -> impl Iterator<Item = Result<u32>> + '_ {
        let mut r = Reader::new(self.rest);
        let n = r.i16();
        let (first, n) = match n {
            Ok(n) => (None, n.max(0)),
            Err(e) => (Some(Err(e)), 0),
        };
        first
            .into_iter()
            .chain((0..n).map(move |_| r.i32().map(|oid| oid as u32)))
    }
}

/// The statement name and SQL of a `Parse` body, and what follows them.
pub fn parse_parse(body: &[u8]) -> Result<ParseMessage<'_>> {
    let mut r = Reader::new(body);
    let name = r.cstr()?;
    let sql = r.cstr()?;
    let rest = body.get(r.pos..).unwrap_or_default();
    Ok(ParseMessage { name, sql, rest })
}

/// A `Parse` frame of statement `name` with `sql`, followed by `rest` (the
/// parameter types, as a [`ParseMessage`] holds them).
pub fn parse(name: &str, sql: &str, rest: &[u8]) -> Frame {
    let mut body = Vec::with_capacity(name.len() + sql.len() + rest.len() + 2);
    put_cstr(&mut body, name);
    put_cstr(&mut body, sql);
    body.extend_from_slice(rest);
    Frame::new(b'P', body)
}

/// The portal and statement names of a `Bind` body (its parameters and
/// formats are not read).
pub fn parse_bind(body: &[u8]) -> Result<(&str, &str)> {
    let mut r = Reader::new(body);
    Ok((r.cstr()?, r.cstr()?))
}

/// The portal and row limit (0: every row) of an `Execute` body.
pub fn parse_execute(body: &[u8]) -> Result<(&str, i32)> {
    let mut r = Reader::new(body);
    Ok((r.cstr()?, r.i32()?))
}

/// An `Execute` frame of `portal` with a row limit of `max_rows`.
pub fn execute(portal: &str, max_rows: i32) -> Frame {
    let mut body = Vec::with_capacity(portal.len() + 5);
    put_cstr(&mut body, portal);
    body.extend_from_slice(&max_rows.to_be_bytes());
    Frame::new(b'E', body)
}

/// What a `Describe` or `Close` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A prepared statement (`S`).
    Statement,
    /// A portal (`P`).
    Portal,
}

impl Target {
    /// The byte that stands for it in a message.
    pub fn byte(self) -> u8 {
        match self {
            Target::Statement => b'S',
            Target::Portal => b'P',
        }
    }
}

/// What a `Close` (or `Describe`) body names: a statement or portal and
/// its name. The name is read first: a body without one is an error
/// before its kind is judged.
pub fn parse_close(body: &[u8]) -> Result<(Target, &str)> {
    let kind = body.first().copied().unwrap_or(0);
    let name = Reader::new(body.get(1..).unwrap_or_default()).cstr()?;
    let target = match kind {
        b'S' => Target::Statement,
        b'P' => Target::Portal,
        _ => return Err(ProxyError::Protocol("a Close of neither S nor P".into())),
    };
    Ok((target, name))
}

/// A `Close` frame of `name`.
pub fn close(target: Target, name: &str) -> Frame {
    let mut body = vec![target.byte()];
    put_cstr(&mut body, name);
    Frame::new(b'C', body)
}

/// A `Describe` frame of `name`.
pub fn describe(target: Target, name: &str) -> Frame {
    let mut body = vec![target.byte()];
    put_cstr(&mut body, name);
    Frame::new(b'D', body)
}

/// A `Bind` frame of `portal` to `statement`, without parameters.
pub fn bind(portal: &str, statement: &str) -> Frame {
    let mut body = Vec::new();
    put_cstr(&mut body, portal);
    put_cstr(&mut body, statement);
    body.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    Frame::new(b'B', body)
}

/// A `Sync` frame.
pub fn sync() -> Frame {
    Frame::new(b'S', Vec::new())
}

/// The (table OID, column number) of each field of a RowDescription
/// body (0 and 0 for a field that is not a table's column).
pub fn parse_row_origins(body: &[u8]) -> Result<Vec<(u32, i16)>> {
    let mut r = Reader::new(body);
    let n = r.i16()?;
    let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    for _ in 0..n {
        r.cstr()?;
        let table = r.i32()? as u32;
        let attnum = r.i16()?;
        r.bytes(4 + 2 + 4 + 2)?;
        out.push((table, attnum));
    }
    Ok(out)
}

/// A RowDescription body of text fields named `names`, each from the
/// (table OID, column number) beside it.
pub fn row_description(fields: &[(&str, u32, i16)]) -> Vec<u8> {
    let mut body = (fields.len() as i16).to_be_bytes().to_vec();
    for (name, table, attnum) in fields {
        put_cstr(&mut body, name);
        body.extend_from_slice(&table.to_be_bytes());
        body.extend_from_slice(&attnum.to_be_bytes());
        // Type text (25), length -1, modifier -1, text format.
        body.extend_from_slice(&25u32.to_be_bytes());
        body.extend_from_slice(&(-1i16).to_be_bytes());
        body.extend_from_slice(&(-1i32).to_be_bytes());
        body.extend_from_slice(&0i16.to_be_bytes());
    }
    body
}

/// The number of fields a DataRow body declares.
pub fn data_row_width(body: &[u8]) -> Result<i16> {
    Reader::new(body).i16()
}

/// The transaction status of a ReadyForQuery body ([`READY_IDLE`], `T`
/// in a transaction block, `E` in a failed one).
pub fn ready_status(body: &[u8]) -> Option<u8> {
    body.first().copied()
}

/// The transaction status of a ReadyForQuery outside a transaction block.
pub const READY_IDLE: u8 = b'I';

/// The SQLSTATE (`C` field) of an ErrorResponse or NoticeResponse body,
/// when it has one and can be read.
pub fn error_code(body: &[u8]) -> Option<String> {
    parse_fields(body)
        .ok()?
        .into_iter()
        .find(|(c, _)| *c == b'C')
        .map(|(_, v)| v)
}

/// Frames up to this size are copied into one buffer behind their header
/// and written at once (one write for a small row); a larger one is written
/// as its header, then its body where it lies, never copied.
const WRITE_COPY_MAX: usize = 64 << 10;

/// Writes one frame. A large value is held once, as it was read or built,
/// not once more per copy on its way out (a 200 MB value used to take
/// three times its size).
pub(crate) async fn write<W: AsyncWrite + Unpin>(w: &mut W, f: &Frame) -> Result<()> {
    if f.body.len() <= WRITE_COPY_MAX {
        w.write_all(&f.to_bytes()).await?;
    } else {
        w.write_all(&f.header()).await?;
        w.write_all(&f.body).await?;
    }
    Ok(())
}

/// The piece [`copy_body`] moves at a time.
const COPY_CHUNK: usize = 64 << 10;

/// Copies the next `len` bytes of `r` (the rest of a message's body) to
/// `w`, a chunk at a time: a value relayed unchanged is never held whole.
pub(crate) async fn copy_body<R, W>(r: &mut R, w: &mut W, mut len: usize) -> Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; COPY_CHUNK.min(len)];
    while len > 0 {
        let n = len.min(buf.len());
        r.read_exact(&mut buf[..n]).await?;
        w.write_all(&buf[..n]).await?;
        len -= n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_is_copied_whole_in_chunks() {
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut r = &body[..];
        let mut out = Vec::new();
        copy_body(&mut r, &mut out, 150_000).await.unwrap();
        assert_eq!(out, body[..150_000]);
        assert_eq!(r.len(), 50_000, "what follows the body is left unread");
        // A stream that ends inside the body is an error, not a short copy.
        let mut short = &body[..10];
        assert!(copy_body(&mut short, &mut Vec::new(), 11).await.is_err());
    }

    #[test]
    fn data_rows_parse_and_short_ones_are_errors() {
        let body = [
            0, 3, 0, 0, 0, 3, b'a', b'b', b'c', 255, 255, 255, 255, 0, 0, 0, 0,
        ];
        let fields = parse_data_row(&body).unwrap();
        assert_eq!(fields, vec![Some(&b"abc"[..]), None, Some(&b""[..])]);
        assert!(parse_data_row(&body[..body.len() - 5]).is_err());
        assert_eq!(data_row(&fields), body);
        assert_eq!(data_row_len(&fields), body.len());
    }

    #[test]
    fn error_fields_round_trip() {
        let f = error("FATAL", "28000", "no");
        let fields = parse_fields(&f.body).unwrap();
        assert_eq!(fields[2], (b'C', "28000".to_string()));
        assert_eq!(fields_body(&fields), f.body);
    }

    #[test]
    fn cancel_requests_round_trip_with_their_code() {
        let req = cancel_request(4242, -7);
        // Length 16, then the code 80877102 (04 d2 16 2e).
        assert_eq!(req[..8], [0, 0, 0, 16, 4, 210, 22, 46]);
        assert_eq!(parse_cancel_request(&req[4..]).unwrap(), (4242, -7));
        assert!(parse_cancel_request(&req[4..12]).is_err());
        assert!(parse_cancel_request(&ssl_request()[4..]).is_err());
        let k = backend_key_data(4242, -7);
        let mut r = Reader::new(&k.body);
        assert_eq!(
            (k.tag, r.i32().unwrap(), r.i32().unwrap()),
            (b'K', 4242, -7)
        );
    }

    #[test]
    fn startup_params_parse_in_order() {
        let mut body = Vec::new();
        for s in ["user", "u", "options", "-c x=y", ""] {
            put_cstr(&mut body, s);
        }
        assert_eq!(
            parse_startup_params(&body).unwrap(),
            vec![
                ("user".to_string(), "u".to_string()),
                ("options".to_string(), "-c x=y".to_string())
            ]
        );
        assert!(parse_startup_params(b"user\0u").is_err());
    }

    #[test]
    fn proxy_modes_messages_round_trip() {
        let q = query("SELECT 1");
        assert_eq!((q.tag, parse_query(&q.body).ok()), (b'Q', Some("SELECT 1")));
        let p = parse("s", "SELECT $1", &[0, 2, 0, 0, 0, 25, 0, 0, 0, 0]);
        let m = parse_parse(&p.body).unwrap();
        assert_eq!((p.tag, m.name, m.sql), (b'P', "s", "SELECT $1"));
        let types: Vec<u32> = m.param_types().map(|t| t.unwrap()).collect();
        assert_eq!(types, [25, 0]);
        // Types are read one at a time: an error where the message ends.
        let short = parse("s", "x", &[0, 2, 0, 0, 0, 25]);
        let m = parse_parse(&short.body).unwrap();
        let types: Vec<bool> = m.param_types().map(|t| t.is_ok()).collect();
        assert_eq!(types, [true, false]);
        let b = bind("portal", "stmt");
        assert_eq!(
            (b.tag, parse_bind(&b.body).ok()),
            (b'B', Some(("portal", "stmt")))
        );
        let e = execute("portal", 7);
        assert_eq!(
            (e.tag, parse_execute(&e.body).ok()),
            (b'E', Some(("portal", 7)))
        );
        for target in [Target::Statement, Target::Portal] {
            let c = close(target, "n");
            assert_eq!(
                (c.tag, parse_close(&c.body).ok()),
                (b'C', Some((target, "n")))
            );
            let d = describe(target, "n");
            assert_eq!(
                (d.tag, parse_close(&d.body).ok()),
                (b'D', Some((target, "n")))
            );
        }
        assert!(parse_close(b"Xn\0").is_err());
        assert!(parse_close(b"S").is_err());
        assert!(parse_execute(b"p\0\0").is_err());
        let t = row_description(&[("id", 1000, 1), ("?column?", 0, 0)]);
        assert_eq!(parse_row_origins(&t).ok(), Some(vec![(1000, 1), (0, 0)]));
        assert!(parse_row_origins(&t[..t.len() - 1]).is_err());
        assert_eq!(data_row_width(&data_row(&[None, None])).ok(), Some(2));
        assert_eq!((sync().tag, sync().body.len()), (b'S', 0));
        assert_eq!(ready_status(b"T"), Some(b'T'));
        assert_eq!(
            error_code(&error("ERROR", "42P01", "m").body).as_deref(),
            Some("42P01")
        );
        assert_eq!(error_code(b"Mno code\0\0"), None);
        assert_eq!(error_code(b"C"), None);
    }
}
