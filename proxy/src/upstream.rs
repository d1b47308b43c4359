//! The connection to the real server: TCP or a unix socket, startup and
//! authentication (trust, password, MD5, SCRAM-SHA-256) as a user's
//! upstream login, simple queries before relaying starts (the masking
//! check), and cancel requests.

use std::pin::Pin;

use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::config;
use crate::error::{ProxyError, Result};
use crate::wire::{self, put_cstr, Frame};

/// A byte stream to the server.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// Who the proxy logs in as upstream: a client user's `upstream_user`.
#[derive(Debug, Clone)]
pub struct Login {
    /// The upstream role.
    pub user: String,
    /// Its password, when the server asks for one.
    pub password: Option<config::Secret>,
}

impl Login {
    /// The upstream login of a configured user.
    pub fn of(u: &config::User) -> Self {
        Login {
            user: u.upstream_user.clone(),
            password: u.upstream_password.clone(),
        }
    }
}

/// An authenticated upstream connection.
pub struct Upstream {
    /// The stream, ready for queries.
    pub stream: Pin<Box<dyn Stream>>,
    /// ParameterStatus frames the server sent during startup.
    pub parameters: Vec<Frame>,
    /// The server's (process id, secret key) from BackendKeyData, for cancel
    /// requests.
    pub key_data: Option<(i32, i32)>,
}

/// Opens a byte stream to the server: a unix socket, or TCP with TLS as
/// `sslmode` asks (libpq's negotiation: an SSLRequest, then the handshake
/// on 'S'; on 'N' plain only for `prefer`).
pub async fn open(cfg: &config::Upstream) -> Result<Pin<Box<dyn Stream>>> {
    if cfg.host.starts_with('/') {
        let path = format!("{}/.s.PGSQL.{}", cfg.host.trim_end_matches('/'), cfg.port);
        let s = tokio::net::UnixStream::connect(&path)
            .await
            .map_err(|e| ProxyError::Upstream(format!("connecting to {path}: {e}")))?;
        return Ok(Box::pin(s));
    }
    let at = || format!("{}:{}", cfg.host, cfg.port);
    let tcp = || async {
        let s = tokio::net::TcpStream::connect((cfg.host.as_str(), cfg.port))
            .await
            .map_err(|e| ProxyError::Upstream(format!("connecting to {}: {e}", at())))?;
        s.set_nodelay(true)?;
        Ok::<_, ProxyError>(s)
    };
    let mut s = tcp().await?;
    let Some(connector) = crate::tls::upstream_connector(cfg)? else {
        return Ok(Box::pin(s));
    };
    s.write_all(&wire::ssl_request()).await?;
    // Exactly one byte: nothing the server sends before the handshake may
    // be read as part of it (CVE-2021-23214).
    let mut answer = [0u8; 1];
    tokio::io::AsyncReadExt::read_exact(&mut s, &mut answer).await?;
    match answer[0] {
        b'S' => {
            let name = crate::tls::server_name(&cfg.host)?;
            match connector.connect(name, s).await {
                Ok(tls) => Ok(Box::pin(tls)),
                // As libpq: prefer retries without TLS when the handshake
                // fails (e.g. a server with only TLS 1.0 or old ciphers).
                Err(e) if cfg.sslmode == config::SslMode::Prefer => {
                    tracing::warn!(upstream = %at(), error = %e, "TLS handshake failed; sslmode=prefer connects without TLS");
                    Ok(Box::pin(tcp().await?))
                }
                Err(e) => Err(ProxyError::Upstream(format!("TLS to {}: {e}", at()))),
            }
        }
        b'N' if cfg.sslmode == config::SslMode::Prefer => Ok(Box::pin(s)),
        b'N' => Err(ProxyError::Upstream(format!(
            "{} does not offer TLS and upstream.sslmode requires it",
            at()
        ))),
        other => Err(ProxyError::Upstream(format!(
            "{} answered the TLS request with {:?}",
            at(),
            char::from(other)
        ))),
    }
}

async fn send(s: &mut Pin<Box<dyn Stream>>, f: Frame) -> Result<()> {
    wire::write(s, &f).await
}

/// Connects, starts up with `params` (which must not hold `user` or
/// `database`) and authenticates as `login`, all within
/// `upstream.connect_timeout_secs`.
pub async fn connect(
    cfg: &config::Upstream,
    login: &Login,
    params: &[(String, String)],
) -> Result<Upstream> {
    let limit = std::time::Duration::from_secs(cfg.connect_timeout_secs);
    tokio::time::timeout(limit, start(cfg, login, params))
        .await
        .map_err(|_| {
            ProxyError::Upstream(format!(
                "no ready connection as \"{}\" within {} s (upstream.connect_timeout_secs)",
                login.user, cfg.connect_timeout_secs
            ))
        })?
}

async fn start(
    cfg: &config::Upstream,
    login: &Login,
    params: &[(String, String)],
) -> Result<Upstream> {
    let mut s = open(cfg).await?;
    let mut body = 196_608i32.to_be_bytes().to_vec();
    for (k, v) in [
        ("user", login.user.as_str()),
        ("database", cfg.dbname.as_str()),
    ] {
        put_cstr(&mut body, k);
        put_cstr(&mut body, v);
    }
    for (k, v) in params {
        put_cstr(&mut body, k);
        put_cstr(&mut body, v);
    }
    body.push(0);
    let mut packet = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    packet.extend_from_slice(&body);
    s.write_all(&packet).await?;

    let password = || {
        login
            .password
            .as_ref()
            .map(|p| p.expose().to_string())
            .ok_or_else(|| {
                ProxyError::Upstream(format!(
                    "the server asks for the password of \"{}\": set upstream_password",
                    login.user
                ))
            })
    };
    let mut scram: Option<ScramSha256> = None;
    let mut parameters = Vec::new();
    let mut key_data = None;
    loop {
        let f = wire::read_frame(&mut s, 1 << 20).await?.ok_or_else(|| {
            ProxyError::Upstream("the server closed the connection during startup".into())
        })?;
        match f.tag {
            b'R' => {
                let mut r = wire::Reader::new(&f.body);
                match r.i32()? {
                    0 => {}
                    3 => {
                        let mut b = Vec::new();
                        put_cstr(&mut b, &password()?);
                        send(&mut s, Frame::new(b'p', b)).await?;
                    }
                    5 => {
                        let salt: [u8; 4] = r
                            .bytes(4)?
                            .try_into()
                            .map_err(|_| ProxyError::Protocol("md5 salt".into()))?;
                        let hash = postgres_protocol::authentication::md5_hash(
                            login.user.as_bytes(),
                            password()?.as_bytes(),
                            salt,
                        );
                        let mut b = Vec::new();
                        put_cstr(&mut b, &hash);
                        send(&mut s, Frame::new(b'p', b)).await?;
                    }
                    10 => {
                        let sc =
                            ScramSha256::new(password()?.as_bytes(), ChannelBinding::unsupported());
                        let mut b = Vec::new();
                        put_cstr(&mut b, "SCRAM-SHA-256");
                        b.extend_from_slice(&(sc.message().len() as i32).to_be_bytes());
                        b.extend_from_slice(sc.message());
                        send(&mut s, Frame::new(b'p', b)).await?;
                        scram = Some(sc);
                    }
                    11 => {
                        let sc = scram.as_mut().ok_or_else(|| {
                            ProxyError::Protocol("SASL continue before start".into())
                        })?;
                        sc.update(&f.body[4..])
                            .map_err(|e| ProxyError::Upstream(e.to_string()))?;
                        send(&mut s, Frame::new(b'p', sc.message().to_vec())).await?;
                    }
                    12 => {
                        let sc = scram.as_mut().ok_or_else(|| {
                            ProxyError::Protocol("SASL final before start".into())
                        })?;
                        sc.finish(&f.body[4..])
                            .map_err(|e| ProxyError::Upstream(e.to_string()))?;
                    }
                    other => {
                        return Err(ProxyError::Upstream(format!(
                            "unsupported authentication request {other}"
                        )))
                    }
                }
            }
            b'S' => parameters.push(f),
            b'K' => {
                let mut r = wire::Reader::new(&f.body);
                key_data = Some((r.i32()?, r.i32()?));
            }
            b'E' => {
                let fields = wire::parse_fields(&f.body)?;
                let msg = fields
                    .iter()
                    .find(|(c, _)| *c == b'M')
                    .map(|(_, m)| m.clone())
                    .unwrap_or_default();
                return Err(ProxyError::Upstream(msg));
            }
            b'Z' => break,
            _ => {}
        }
    }
    Ok(Upstream {
        stream: s,
        parameters,
        key_data,
    })
}

impl Upstream {
    /// The value of run-time parameter `name` as the server reported it at
    /// start-up (ParameterStatus), if it did.
    pub fn parameter(&self, name: &str) -> Option<String> {
        self.parameters.iter().find_map(|f| {
            let mut r = wire::Reader::new(&f.body);
            (r.cstr().ok()? == name).then(|| r.cstr().ok().map(str::to_owned))?
        })
    }

    /// Runs one simple query before relaying starts; the rows in text
    /// format, or the server's error message.
    pub async fn query(
        &mut self,
        sql: &str,
    ) -> Result<std::result::Result<Vec<Vec<Option<String>>>, String>> {
        let mut b = Vec::new();
        put_cstr(&mut b, sql);
        send(&mut self.stream, Frame::new(b'Q', b)).await?;
        let mut rows = Vec::new();
        let mut err = None;
        loop {
            let f = wire::read_frame(&mut self.stream, 64 << 20)
                .await?
                .ok_or_else(|| ProxyError::Upstream("closed during a catalog query".into()))?;
            match f.tag {
                b'D' => rows.push(
                    wire::parse_data_row(&f.body)?
                        .into_iter()
                        .map(|v| v.map(|b| String::from_utf8_lossy(b).into_owned()))
                        .collect(),
                ),
                b'E' => {
                    let fields = wire::parse_fields(&f.body)?;
                    err = fields.into_iter().find(|(c, _)| *c == b'M').map(|(_, m)| m);
                }
                b'Z' => break,
                _ => {}
            }
        }
        Ok(match err {
            Some(e) => Err(e),
            None => Ok(rows),
        })
    }
}

/// Sends the server a CancelRequest for its backend `pid` with `secret`
/// (what its BackendKeyData said), over a connection of its own.
pub async fn cancel(cfg: &config::Upstream, pid: i32, secret: i32) -> Result<()> {
    let limit = std::time::Duration::from_secs(cfg.connect_timeout_secs);
    let mut s = tokio::time::timeout(limit, open(cfg))
        .await
        .map_err(|_| ProxyError::Upstream("no connection for a cancel request".into()))??;
    s.write_all(&wire::cancel_request(pid, secret)).await?;
    s.flush().await?;
    // The server answers by closing the connection; waiting for that keeps
    // the request from being cut off by our own close.
    let mut rest = [0u8; 1];
    let _ = tokio::time::timeout(limit, tokio::io::AsyncReadExt::read(&mut s, &mut rest)).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    fn upstream(port: u16, sslmode: &str) -> config::Upstream {
        toml::from_str(&format!(
            "host = \"127.0.0.1\"\nport = {port}\ndbname = \"d\"\nsslmode = \"{sslmode}\""
        ))
        .expect("upstream")
    }

    /// Accepts one connection, says 'S' to its SSLRequest (the bytes
    /// libpq sends: length 8, code 80877103) and answers the handshake
    /// with bytes that are not TLS.
    async fn break_handshake(listener: &TcpListener) {
        let (mut s, _) = listener.accept().await.expect("connection");
        let mut req = [0u8; 8];
        s.read_exact(&mut req).await.expect("SSLRequest");
        assert_eq!(req, [0, 0, 0, 8, 4, 210, 22, 47]);
        s.write_all(b"S").await.expect("S");
        s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            .await
            .expect("garbage");
    }

    /// A broken handshake, then a second connection that must come (for
    /// `prefer`) and carry plain bytes from the start.
    async fn broken_tls_server(listener: TcpListener) -> Vec<u8> {
        break_handshake(&listener).await;
        let (mut second, _) = listener.accept().await.expect("second connection");
        let mut got = vec![0u8; 5];
        second.read_exact(&mut got).await.expect("plain bytes");
        got
    }

    #[tokio::test]
    async fn prefer_retries_without_tls_after_a_failed_handshake() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(broken_tls_server(listener));
        let mut s = open(&upstream(port, "prefer"))
            .await
            .expect("prefer connects");
        s.write_all(b"hello").await.expect("write");
        s.flush().await.expect("flush");
        assert_eq!(server.await.expect("server"), b"hello");
    }

    #[tokio::test]
    async fn require_fails_when_the_handshake_fails() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move { break_handshake(&listener).await });
        let err = match open(&upstream(port, "require")).await {
            Ok(_) => panic!("require connected without TLS"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("TLS to 127.0.0.1"), "{err}");
    }
}
