//! Randomness: where every mechanism's random source comes from.
//!
//! Three modes (docs/mechanisms.md):
//!
//! - [`RandomMode::Os`]: a ChaCha20 generator seeded from the operating
//!   system for every call (production default without a key);
//! - [`RandomMode::Seeded`]: reproducible for tests and audits;
//! - [`RandomMode::Keyed`]: the stream is derived from a secret key.
//!
//! In the seeded and keyed modes the stream for a call is
//! `ChaCha20(HMAC-SHA256(secret, context))`, where the context is the
//! mechanism, its canonical parameters and the input value (and optionally
//! a row or column the caller names). So the output is a function of
//! (secret, input, parameters) only: asking twice returns the same text,
//! whatever the row order or the parallel worker, which defeats averaging
//! attacks against a view or a proxy queried many times.

use hmac::{Hmac, Mac};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The shortest secret key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 16;

/// The random generator every mechanism draws from.
pub type DpRng = ChaCha20Rng;

/// Where a call's randomness comes from.
#[derive(Clone, Default)]
pub enum RandomMode {
    /// Fresh OS entropy for every call.
    #[default]
    Os,
    /// Deterministic from a public seed (tests, audits).
    Seeded(u64),
    /// Deterministic from a secret key (repeat-stable production outputs).
    Keyed(Secret),
}

/// A secret key; its bytes never appear in `Debug` output.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// Wraps key material.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Secret(bytes.into())
    }

    /// A short public identifier of the key (first 12 hex digits of a
    /// SHA-256 of it), safe to record in provenance and logs.
    pub fn key_id(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"dptext key id\0");
        h.update(&self.0);
        hex::encode(&h.finalize()[..6])
    }

    /// Whether `other` holds the same key material.
    pub fn same(&self, other: &Secret) -> bool {
        self.0 == other.0
    }

    /// A key for another purpose, derived from this one under `domain`
    /// (HMAC-SHA256 of the domain under the key): knowing it reveals
    /// neither this key nor any random stream drawn from it.
    pub fn derive(&self, domain: &[u8]) -> [u8; 32] {
        // HMAC accepts keys of any length: this cannot fail.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            unreachable!("HMAC takes keys of any length")
        };
        mac.update(b"dptext derived key\0");
        mac.update(domain);
        mac.finalize().into_bytes().into()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret(id {})", self.key_id())
    }
}

/// A uniform number in `[0, 1)` from a generator seeded once per thread
/// by the operating system: unpredictable and unseedable by any caller
/// (unlike SQL's `random()`, which `setseed` replays).
pub fn os_unit() -> f64 {
    use rand::Rng;
    thread_local! {
        static OS: std::cell::RefCell<ChaCha20Rng> = std::cell::RefCell::new(ChaCha20Rng::from_os_rng());
    }
    OS.with(|r| r.borrow_mut().random::<f64>())
}

/// Reads a secret key from a file: the whole file, without trailing
/// whitespace. The file must not be readable by group or others (like an
/// SSH key), so that a key kept out of SQL settings also stays out of reach
/// of other local users.
pub fn read_key_file(path: &std::path::Path) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(Error::invalid(
                "key_file",
                format!(
                    "{} is readable by group or others (mode {mode:o}): chmod 600 it",
                    path.display()
                ),
            ));
        }
    }
    let _ = meta;
    let mut bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    while bytes.last().is_some_and(u8::is_ascii_whitespace) {
        bytes.pop();
    }
    Ok(bytes)
}

impl std::fmt::Debug for RandomMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RandomMode::Os => f.write_str("Os"),
            RandomMode::Seeded(s) => write!(f, "Seeded({s})"),
            RandomMode::Keyed(k) => write!(f, "Keyed({k:?})"),
        }
    }
}

impl RandomMode {
    /// Picks the mode from optional settings: a key wins over a seed, and
    /// with neither the OS generator is used. An empty key counts as none;
    /// a key shorter than [`MIN_KEY_BYTES`] is refused, because the public
    /// key id would let anyone test guesses of a short key offline.
    pub fn from_settings(seed: Option<u64>, key: Option<&[u8]>) -> Result<Self> {
        Ok(match (key, seed) {
            (Some(k), _) if !k.is_empty() => {
                if k.len() < MIN_KEY_BYTES {
                    return Err(Error::invalid(
                        "key",
                        format!(
                            "must be at least {MIN_KEY_BYTES} bytes (got {}); use a random key, e.g. `openssl rand -hex 32`",
                            k.len()
                        ),
                    ));
                }
                RandomMode::Keyed(Secret::new(k))
            }
            (_, Some(s)) => RandomMode::Seeded(s),
            _ => RandomMode::Os,
        })
    }

    /// The generator for one call. `context` names everything the output
    /// may depend on (mechanism, parameters, the value, ...); each part is
    /// length-prefixed so that no two different contexts collide.
    pub fn rng_for(&self, context: &[&[u8]]) -> DpRng {
        let secret: Vec<u8> = match self {
            RandomMode::Os => return ChaCha20Rng::from_os_rng(),
            RandomMode::Seeded(s) => {
                let mut v = b"dptext seed\0".to_vec();
                v.extend_from_slice(&s.to_le_bytes());
                v
            }
            RandomMode::Keyed(k) => k.0.clone(),
        };
        // HMAC accepts keys of any length, so this cannot fail.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&secret) else {
            return ChaCha20Rng::from_os_rng();
        };
        for part in context {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        let seed: [u8; 32] = mac.finalize().into_bytes().into();
        ChaCha20Rng::from_seed(seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn draw(m: &RandomMode, ctx: &[&[u8]]) -> [u64; 4] {
        let mut r = m.rng_for(ctx);
        [r.random(), r.random(), r.random(), r.random()]
    }

    #[test]
    fn seeded_and_keyed_are_deterministic_and_context_bound() {
        for m in [RandomMode::Seeded(7), RandomMode::Keyed(Secret::new("k1"))] {
            assert_eq!(draw(&m, &[b"a", b"b"]), draw(&m, &[b"a", b"b"]));
            assert_ne!(draw(&m, &[b"a", b"b"]), draw(&m, &[b"a", b"c"]));
            // Length prefixes keep ("ab","") apart from ("a","b").
            assert_ne!(draw(&m, &[b"ab", b""]), draw(&m, &[b"a", b"b"]));
        }
        assert_ne!(
            draw(&RandomMode::Seeded(7), &[b"x"]),
            draw(&RandomMode::Seeded(8), &[b"x"])
        );
        assert_ne!(
            draw(&RandomMode::Keyed(Secret::new("k1")), &[b"x"]),
            draw(&RandomMode::Keyed(Secret::new("k2")), &[b"x"])
        );
    }

    #[test]
    fn os_mode_differs_between_calls() {
        let m = RandomMode::Os;
        assert_ne!(draw(&m, &[b"x"]), draw(&m, &[b"x"]));
    }

    #[test]
    fn key_file_must_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let p = std::env::temp_dir().join(format!("dptext-key-{}", std::process::id()));
        std::fs::write(&p, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_key_file(&p).unwrap_err();
        assert!(e.to_string().contains("chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_key_file(&p).unwrap(), b"0123456789abcdef0123");
        std::fs::remove_file(&p).unwrap();
        assert!(read_key_file(&p).is_err());
    }

    #[test]
    fn key_never_in_debug() {
        let m = RandomMode::from_settings(Some(1), Some(b"hunter2-secret-key")).unwrap();
        let shown = format!("{m:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(matches!(m, RandomMode::Keyed(_)));
        assert!(matches!(
            RandomMode::from_settings(Some(3), None).unwrap(),
            RandomMode::Seeded(3)
        ));
        assert!(matches!(
            RandomMode::from_settings(None, Some(b"")).unwrap(),
            RandomMode::Os
        ));
        assert_eq!(Secret::new("a").key_id().len(), 12);
        let short = RandomMode::from_settings(None, Some(b"hunter2")).unwrap_err();
        assert!(
            short
                .to_string()
                .contains("\"key\": must be at least 16 bytes (got 7)"),
            "{short}"
        );
    }
}
