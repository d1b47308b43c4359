//! Parse trees cached by statement text, shared by all sessions: the same
//! statements come again and again (drivers, BI tools, psql), and parsing
//! is the analyzer's largest cost.
//!
//! The cache is bounded by an estimate of its memory: each entry weighs
//! [`ENTRY_OVERHEAD`] plus [`BYTES_PER_TEXT_BYTE`] per byte of statement
//! text, since a parse tree grows with the text it comes from. Only the
//! tree is cached: the analysis depends on the session's `search_path`,
//! the catalog and the policy, and is cheap next to parsing.
//!
//! Beside the trees, the cache keeps the text forwarded for each
//! statement text (see `qualify`), keyed by that text and the schema each
//! of its relations resolved to: what the rewrite depends on (functions,
//! operators and types always qualify to `pg_catalog`). Two sessions
//! whose search paths or catalogs resolve a name differently get
//! different entries.

use std::sync::Arc;

use pg_query::protobuf::ParseResult;

use super::nodes::Relations;
use super::qualify;
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
    forwarded: moka::sync::Cache<Arc<str>, Arc<str>>,
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
        let forwarded = moka::sync::Cache::builder()
            .max_capacity(max_bytes / 4)
            .weigher(|key: &Arc<str>, text: &Arc<str>| {
                let len = key.len().saturating_add(text.len());
                u32::try_from(len)
                    .unwrap_or(u32::MAX)
                    .saturating_add(ENTRY_OVERHEAD)
            })
            .build();
        ParseCache { trees, forwarded }
    }

    /// The text to forward for `sql`, whose statements (`tree`) passed
    /// the analysis with their relations resolved as `relations` says
    /// (one map per statement): from the cache, or rewritten now.
    pub(super) fn forward(
        &self,
        sql: &str,
        tree: &ParseResult,
        relations: &[Relations],
    ) -> Result<Arc<str>, Refusal> {
        let mut key = String::with_capacity(sql.len() + 32);
        key.push_str(sql);
        for (i, rels) in relations.iter().enumerate() {
            for (at, schema) in rels {
                // NUL cannot occur in statement text nor in a name.
                key.push_str(&format!("\0{i}:{at}:{schema}"));
            }
        }
        if let Some(text) = self.forwarded.get(key.as_str()) {
            return Ok(text);
        }
        let text: Arc<str> = match qualified(tree, relations)? {
            Some(text) => Arc::from(text),
            None => Arc::from(sql),
        };
        self.forwarded.insert(Arc::from(key), text.clone());
        Ok(text)
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

/// The statements of `tree` with their names qualified, deparsed; `None`
/// when nothing needed qualifying. The text must parse back to exactly
/// the rewritten statements (positions aside), or the statement is
/// refused.
fn qualified(tree: &ParseResult, relations: &[Relations]) -> Result<Option<String>, Refusal> {
    if relations.len() != tree.stmts.len() {
        return Err(qualification(
            "the analysis and the statements differ in number",
        ));
    }
    let mut rewritten = tree.clone();
    let mut changed = false;
    for (raw, rels) in rewritten.stmts.iter_mut().zip(relations) {
        let Some(stmt) = raw.stmt.as_mut() else {
            return Err(qualification("an empty statement"));
        };
        changed |= qualify::statement(stmt, rels)?;
    }
    if !changed {
        return Ok(None);
    }
    let deparsed = std::panic::catch_unwind(|| pg_query::deparse(&rewritten, Default::default()));
    let text = match deparsed {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "deparse failed");
            return Err(qualification("deparsing it failed"));
        }
        Err(_) => return Err(qualification("deparsing it failed")),
    };
    let again =
        parse_uncached(&text).map_err(|_| qualification("its deparsed text does not parse"))?;
    let same = again.stmts.len() == rewritten.stmts.len()
        && again
            .stmts
            .iter()
            .zip(&rewritten.stmts)
            .all(|(a, b)| qualify::shape(&a.stmt) == qualify::shape(&b.stmt));
    if !same {
        tracing::debug!("deparsed text parses to another shape");
        return Err(qualification(
            "its deparsed text does not parse back to the same statement",
        ));
    }
    Ok(Some(text))
}

fn qualification(why: &str) -> Refusal {
    Refusal::new(
        Rule::QualificationFailed,
        format!("the statement could not be forwarded with qualified names: {why}"),
    )
}
