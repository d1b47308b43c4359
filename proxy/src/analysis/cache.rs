//! Parse trees cached by statement text, shared by all sessions: the same
//! statements come again and again (drivers, BI tools, psql), and parsing
//! is the analyzer's largest cost.
//!
//! The cache is bounded by an estimate of its memory: each entry weighs
//! [`ENTRY_OVERHEAD`] plus [`BYTES_PER_TEXT_BYTE`] per byte of statement
//! text, since a parse tree grows with the text it comes from. Only the
//! tree is cached: the analysis depends on the session's `search_path`,
//! the catalog and the policy, and is cheap next to parsing.

use std::sync::Arc;

use pg_query::protobuf::ParseResult;

use super::refusal::parse_message;
use super::{Refusal, Rule};

/// Default bound of the cache, in estimated bytes (16 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 16 << 20;
/// Estimated bytes of one entry besides its text.
pub const ENTRY_OVERHEAD: u32 = 256;
/// Estimated bytes of parse tree per byte of statement text.
pub const BYTES_PER_TEXT_BYTE: u32 = 32;

/// Parse trees by statement text.
#[derive(Clone)]
pub struct ParseCache {
    trees: moka::sync::Cache<Arc<str>, Arc<ParseResult>>,
}

impl Default for ParseCache {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BYTES)
    }
}

impl ParseCache {
    /// A cache holding at most about `max_bytes` (see the module docs).
    pub fn new(max_bytes: u64) -> Self {
        let trees = moka::sync::Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|text: &Arc<str>, _tree: &Arc<ParseResult>| {
                let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
                len.saturating_mul(BYTES_PER_TEXT_BYTE)
                    .saturating_add(ENTRY_OVERHEAD)
            })
            .build();
        ParseCache { trees }
    }

    /// The parse tree of `sql`, from the cache or parsed now. Text the
    /// grammar refuses is refused with [`Rule::ParseError`] (and not
    /// cached).
    pub fn parse(&self, sql: &str) -> Result<Arc<ParseResult>, Refusal> {
        if let Some(tree) = self.trees.get(sql) {
            return Ok(tree);
        }
        let tree = Arc::new(parse_uncached(sql)?);
        self.trees.insert(Arc::from(sql), tree.clone());
        Ok(tree)
    }

    /// How many trees are cached (after pending maintenance).
    pub fn entry_count(&self) -> u64 {
        self.trees.run_pending_tasks();
        self.trees.entry_count()
    }
}

/// Parses with libpg_query. A panic inside the binding (it asserts on
/// shapes the grammar should never produce) refuses the statement rather
/// than ending the session's task.
fn parse_uncached(sql: &str) -> Result<ParseResult, Refusal> {
    let parsed = std::panic::catch_unwind(|| pg_query::parse(sql, 0));
    match parsed {
        Ok(Ok(result)) => Ok(result.protobuf),
        Ok(Err(pg_query::Error::Parse(m))) => {
            Err(Refusal::new(Rule::ParseError, parse_message(&m)))
        }
        Ok(Err(pg_query::Error::Decode(_))) => Err(Refusal::new(
            Rule::TooComplex,
            "the statement nests deeper than the analyzer follows",
        )),
        Ok(Err(_)) => Err(Refusal::new(
            Rule::ParseError,
            "the statement could not be parsed",
        )),
        Err(_) => Err(Refusal::new(
            Rule::ParseError,
            "the statement could not be parsed",
        )),
    }
}
