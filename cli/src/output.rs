//! Output that appears whole or not at all.
//!
//! A run that fails half way (a missing field on line 900, a model error)
//! must not leave half a file of which the first part looks sanitized and
//! the rest is missing: `--output FILE` writes a temporary file beside
//! `FILE` and renames it over `FILE` at the end; standard output is spooled
//! to an anonymous temporary file and copied out only after success.

use std::fs;
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Where a run writes; [`Output::commit`] publishes it, dropping it
/// discards everything written.
pub enum Output {
    /// Spooled, then copied to standard output.
    Stdout(fs::File),
    /// A temporary file beside `target`, renamed onto it.
    File {
        /// The temporary file (removed on drop unless committed).
        tmp: tempfile::NamedTempFile,
        /// The path the user asked for.
        target: PathBuf,
    },
}

impl Output {
    /// Opens the spool for `target` (`None`: standard output).
    pub fn open(target: Option<&Path>) -> Result<Self> {
        match target {
            None => Ok(Output::Stdout(
                tempfile::tempfile().context("creating a temporary file to spool the output")?,
            )),
            Some(target) => {
                let dir = match target.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                let name = target
                    .file_name()
                    .with_context(|| format!("--output {}: not a file name", target.display()))?;
                let tmp = tempfile::Builder::new()
                    .prefix(&format!(".{}.", name.to_string_lossy()))
                    .suffix(".tmp")
                    .tempfile_in(dir)
                    .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
                Ok(Output::File {
                    tmp,
                    target: target.to_path_buf(),
                })
            }
        }
    }

    /// The stream to write to.
    pub fn writer(&mut self) -> &mut dyn Write {
        match self {
            Output::Stdout(f) => f,
            Output::File { tmp, .. } => tmp.as_file_mut(),
        }
    }

    /// Publishes what was written: copies the spool to standard output, or
    /// renames the temporary file onto the target.
    pub fn commit(self) -> Result<()> {
        match self {
            Output::Stdout(mut f) => {
                f.rewind().context("rewinding the output spool")?;
                let mut out = io::stdout().lock();
                io::copy(&mut f, &mut out).context("writing to standard output")?;
                out.flush().context("writing to standard output")
            }
            Output::File { tmp, target } => {
                tmp.as_file().sync_all().context("flushing the output")?;
                // A file replaced keeps its mode; a new one stays private
                // (600) like every temporary file.
                if let Ok(meta) = fs::metadata(&target) {
                    fs::set_permissions(tmp.path(), meta.permissions())
                        .with_context(|| format!("copying the mode of {}", target.display()))?;
                }
                tmp.persist(&target)
                    .map_err(|e| e.error)
                    .with_context(|| format!("renaming the output onto {}", target.display()))?;
                Ok(())
            }
        }
    }
}
