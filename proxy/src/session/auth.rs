//! SCRAM-SHA-256 of client users.
//!
//! Every name gets a salt that is a keyed function of the name
//! (HMAC-SHA-256 of the proxy's secret), and the same iteration count, so
//! that the server-first message of an unknown name looks like a known
//! user's and stays the same from one attempt to the next: a login attempt
//! does not tell which names exist.

use hmac::{Hmac, Mac};
use pgwire::api::auth::sasl::scram::{gen_salted_password, ScramServerAuth};
use pgwire::api::auth::Password;
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::write;
use crate::config;
use crate::error::{ProxyError, Result};
use crate::wire::{self, put_cstr};

/// PBKDF2 iterations of every user's salted password (PostgreSQL's default).
pub const ITERATIONS: usize = 4096;
const SALT_BYTES: usize = 16;

/// A client user as the proxy checks it.
pub struct Account {
    /// The user's configuration.
    pub user: config::User,
    salted: Vec<u8>,
}

/// Salts and salted passwords of the configured users.
pub struct Accounts {
    by_name: std::collections::HashMap<String, Account>,
    secret: Vec<u8>,
}

impl Accounts {
    /// Salts every user's password with the salt [`Accounts::salt`] gives
    /// it under `secret`.
    pub fn new(users: &[config::User], secret: &[u8]) -> Self {
        let mut a = Accounts {
            by_name: Default::default(),
            secret: secret.to_vec(),
        };
        for u in users {
            let salted = gen_salted_password(u.password.expose(), &a.salt(&u.name), ITERATIONS);
            a.by_name.insert(
                u.name.clone(),
                Account {
                    user: u.clone(),
                    salted,
                },
            );
        }
        a
    }

    /// The SCRAM salt of `name`, known or not.
    pub fn salt(&self, name: &str) -> Vec<u8> {
        // An HMAC key of any length is valid; the error cannot happen.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.secret) else {
            return vec![0; SALT_BYTES];
        };
        mac.update(b"dptext-proxy scram salt\0");
        mac.update(name.as_bytes());
        mac.finalize().into_bytes()[..SALT_BYTES].to_vec()
    }

    /// The account of `name`.
    pub fn get(&self, name: &str) -> Option<&Account> {
        self.by_name.get(name)
    }
}

/// SCRAM-SHA-256 with the client as `user`; its account when the proof
/// is right. The caller bounds its time (the start-up deadline).
pub async fn authenticate<'a, R, W>(
    cr: &mut R,
    cw: &mut W,
    accounts: &'a Accounts,
    user: &str,
) -> Result<&'a Account>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let known = accounts.get(user);
    // Unknown names go through the same exchange, with their own salt and
    // a random salted password that no proof matches.
    let salted = match known {
        Some(a) => a.salted.clone(),
        None => rand::random::<[u8; 32]>().to_vec(),
    };
    let mut mechs = Vec::new();
    put_cstr(&mut mechs, "SCRAM-SHA-256");
    mechs.push(0);
    write(cw, &wire::auth(10, &mechs)).await?;
    cw.flush().await?;
    let first = wire::read_frame(cr, 10_000)
        .await?
        .filter(|f| f.tag == b'p')
        .ok_or_else(|| ProxyError::Protocol("expected SASLInitialResponse".into()))?;
    let mut r = wire::Reader::new(&first.body);
    if r.cstr()? != "SCRAM-SHA-256" {
        return Err(ProxyError::Auth(user.to_string()));
    }
    let n = r.i32()?;
    let data = r.bytes(usize::try_from(n).unwrap_or(0))?;
    let mut server = ScramServerAuth::new();
    server.set_iterations(ITERATIONS);
    let (server_first, waiting) = server
        .on_client_first_message(data, Password::new(Some(accounts.salt(user)), salted))
        .map_err(|_| ProxyError::Auth(user.to_string()))?;
    write(cw, &wire::auth(11, server_first.as_bytes())).await?;
    cw.flush().await?;
    let fin = wire::read_frame(cr, 10_000)
        .await?
        .filter(|f| f.tag == b'p')
        .ok_or_else(|| ProxyError::Protocol("expected SASLResponse".into()))?;
    let server_final = waiting
        .on_client_final_message(&fin.body)
        .map_err(|_| ProxyError::Auth(user.to_string()))?;
    let Some(known) = known else {
        return Err(ProxyError::Auth(user.to_string()));
    };
    write(cw, &wire::auth(12, server_final.as_bytes())).await?;
    Ok(known)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salts_are_keyed_functions_of_the_name() {
        let users: Vec<config::User> = Vec::new();
        let a = Accounts::new(&users, b"a secret of the proxy");
        let b = Accounts::new(&users, b"another secret");
        assert_eq!(a.salt("nobody"), a.salt("nobody"));
        assert_eq!(a.salt("nobody").len(), SALT_BYTES);
        assert_ne!(a.salt("nobody"), a.salt("nobody2"));
        assert_ne!(a.salt("nobody"), b.salt("nobody"));
    }
}
