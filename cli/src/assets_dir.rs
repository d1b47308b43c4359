//! Which assets directory the command uses.
//!
//! `--assets DIR`, else `$DPTEXT_ASSETS`, else the first of these that
//! holds an installed set (`installed.json`):
//! 1. core's default, the user's cache directory (`$XDG_CACHE_HOME/dptext`
//!    or `~/.cache/dptext`);
//! 2. `assets/` beside the directory of the running binary, which is where
//!    `scripts/setup.sh` installs them for a clone (`target/release/dptext`
//!    reads `target/assets`).
//!
//! When none holds one, the cache directory (where `dptext assets fetch`
//! then installs). A missing-asset error lists every place looked at.

use std::path::{Path, PathBuf};

/// The chosen directory and how it was chosen.
pub struct AssetsDir {
    /// The directory every command reads (and `assets fetch` writes).
    pub dir: PathBuf,
    /// Every directory considered, in order, with what it is.
    pub looked: Vec<(PathBuf, &'static str)>,
}

/// Marks an installed set (written by `dptext assets fetch`).
const INSTALLED: &str = "installed.json";

impl AssetsDir {
    /// Resolves the directory as the module documents.
    pub fn resolve(flag: Option<&Path>) -> Self {
        if let Some(p) = flag.filter(|p| !p.as_os_str().is_empty()) {
            return Self::explicit(p.to_path_buf(), "--assets");
        }
        if let Some(p) = std::env::var_os("DPTEXT_ASSETS").filter(|p| !p.is_empty()) {
            return Self::explicit(PathBuf::from(p), "$DPTEXT_ASSETS");
        }
        let cache = dptext_core::assets::resolve_dir(None);
        let mut looked = vec![(cache.clone(), "the user's cache directory")];
        if let Some(beside) = beside_binary() {
            if beside != cache {
                looked.push((
                    beside,
                    "beside the dptext binary, where scripts/setup.sh installs",
                ));
            }
        }
        let dir = looked
            .iter()
            .map(|(p, _)| p)
            .find(|p| p.join(INSTALLED).is_file())
            .unwrap_or(&cache)
            .clone();
        AssetsDir { dir, looked }
    }

    fn explicit(dir: PathBuf, how: &'static str) -> Self {
        AssetsDir {
            looked: vec![(dir.clone(), how)],
            dir,
        }
    }

    /// A hint for an error about a missing asset: where it looked and how
    /// to point the command elsewhere.
    pub fn hint(&self) -> String {
        let mut s = String::from("looked for the assets in:");
        for (p, what) in &self.looked {
            s.push_str(&format!("\n  {} ({what})", p.display()));
        }
        s.push_str(
            "\ninstall them with `dptext assets fetch`, or point at an installed set with \
             --assets DIR or DPTEXT_ASSETS=DIR (scripts/setup.sh installs into <clone>/target/assets \
             unless DPTEXT_ASSETS was set)",
        );
        s
    }
}

/// `<dir of the executable>/../assets`, with the executable's links resolved.
fn beside_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    Some(exe.parent()?.parent()?.join("assets"))
}
