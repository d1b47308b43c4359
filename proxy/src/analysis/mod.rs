//! The statement analyzer of proxy mode: decides, before a masked
//! session's SQL reaches the server, whether it may be forwarded, and for
//! a query which result columns carry protected values.
//!
//! Every statement is parsed with PostgreSQL's own grammar (libpg_query,
//! through the `pg_query` crate) and checked against an allow-list; what
//! is not understood is refused, with a [`Refusal`] naming the [`Rule`].
//! Protected columns may only be output bare by the select list of a
//! query (or of a derived table or CTE, which then carries them as
//! protected); they may not feed any expression, predicate, join,
//! grouping, ordering, window, aggregate, set operation or whole-row
//! value. The rules for users are in docs/proxy-allowlist.md.
//!
//! - [`catalog`]: the [`Catalog`] trait and an in-memory catalog;
//! - [`cache`]: parse trees cached by statement text;
//! - `statement`: the statement-kind allow-list, settings, cursors and
//!   prepared statements;
//! - `query`, `from`, `expr`, `scope`: select trees, `FROM` items,
//!   expressions, and column resolution;
//! - `guards`: relations that may not be read at all (their owner,
//!   partitions, policies or indexes);
//! - `functions`: functions, operators and types;
//! - [`defaults`]: the default allow- and deny-lists.

pub mod cache;
pub mod catalog;
pub mod defaults;
mod expr;
mod from;
mod functions;
mod guards;
mod nodes;
mod order;
mod qualify;
mod query;
mod refusal;
mod scope;
mod statement;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub use cache::ParseCache;
pub use catalog::{
    Catalog, FunctionInfo, FunctionKind, MemoryCatalog, OperatorInfo, PolicyReads, ProtectedIndex,
    RelationInfo, RelationKind, RowSecurity, Split, SplitBy, UntrustedOwner, Volatility,
};
pub use refusal::{Refusal, Rule};

/// A schema-qualified name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QualName {
    /// The schema.
    pub schema: String,
    /// The name in it.
    pub name: String,
}

impl QualName {
    /// `schema.name`.
    pub fn new(schema: impl Into<String>, name: impl Into<String>) -> Self {
        QualName {
            schema: schema.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for QualName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.schema, self.name)
    }
}

/// What may be asked: the protected columns, the relations relayed as
/// they are, and the allow- and deny-lists. [`Policy::default`] holds the
/// documented default lists ([`defaults`]) and protects nothing.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Protected columns per table: column name to the rule (an opaque
    /// identifier the proxy sanitizes the column's values with).
    pub protected: HashMap<QualName, BTreeMap<String, String>>,
    /// Relations declared already sanitized (`[[sanitized]]`): read as
    /// they are, whatever their kind, their columns not protected.
    pub sanitized: BTreeSet<QualName>,
    /// Settings that `SET`/`RESET` may change (lower case). `dptext.*` is
    /// refused even when listed.
    pub allowed_settings: BTreeSet<String>,
    /// Settings `SHOW` may read (lower case): the default
    /// [`defaults::ALLOWED_SETTINGS`] and [`defaults::SHOWN_SETTINGS`].
    /// `dptext.*` and `SHOW ALL` are refused even when listed.
    pub shown_settings: BTreeSet<String>,
    /// `pg_catalog` functions refused even when IMMUTABLE (also checked
    /// against the functions behind operators).
    pub denied_functions: BTreeSet<String>,
    /// `pg_catalog` functions allowed although STABLE (date and time
    /// formatting, and the functions behind cross-type date/time
    /// operators). VOLATILE ones are never allowed.
    pub stable_functions: BTreeSet<String>,
    /// `pg_catalog` functions that read definitions from the catalog
    /// (psql's `\d`, SQLAlchemy's inspection): allowed whatever their
    /// volatility, but only with arguments that are values of the catalog
    /// (constants, parameters, columns of `catalog_relations`), never
    /// values read from a table.
    pub catalog_functions: BTreeSet<String>,
    /// Set-returning `pg_catalog` functions allowed in `FROM`.
    pub from_functions: BTreeSet<String>,
    /// Relations of `pg_catalog` and `information_schema` that may be
    /// read (as unprotected relations); any other is refused.
    pub catalog_relations: BTreeSet<QualName>,
    /// Columns of catalog relations that give relations' row counts or
    /// sizes (`pg_class.reltuples`, `relpages`...): refused, by any
    /// reference, `*` and whole rows included, while any column is
    /// protected. The rows of a partition, of a partial index or of a
    /// TOAST table are chosen by values, and their sizes add up values'
    /// lengths.
    pub size_columns: BTreeMap<QualName, BTreeSet<String>>,
    /// The session's `temp_file_limit` when it is set (not `-1`). A
    /// server that stores rows with raw protected values (the rows of
    /// `EXECUTE` and `FETCH`, a sort) writes them to temporary files once
    /// they pass `work_mem`, and fails once those pass this limit: at a
    /// size a padding column can tune, one bit about raw lengths per
    /// session. With a limit set such statements are refused.
    pub spill_limit: Option<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            protected: HashMap::new(),
            sanitized: BTreeSet::new(),
            allowed_settings: defaults::set(defaults::ALLOWED_SETTINGS),
            shown_settings: defaults::set(defaults::ALLOWED_SETTINGS)
                .into_iter()
                .chain(defaults::set(defaults::SHOWN_SETTINGS))
                .collect(),
            denied_functions: defaults::set(defaults::DENIED_FUNCTIONS),
            stable_functions: defaults::set(defaults::STABLE_FUNCTIONS),
            catalog_functions: defaults::set(defaults::CATALOG_FUNCTIONS),
            from_functions: defaults::set(defaults::FROM_FUNCTIONS),
            catalog_relations: defaults::catalog_relations(),
            size_columns: defaults::size_columns(),
            spill_limit: None,
        }
    }
}

impl Policy {
    /// Protects `schema.table.column` with `rule`.
    pub fn protect(&mut self, schema: &str, table: &str, column: &str, rule: &str) {
        self.protected
            .entry(QualName::new(schema, table))
            .or_default()
            .insert(column.to_owned(), rule.to_owned());
    }

    /// Declares `schema.name` sanitized.
    pub fn sanitize(&mut self, schema: &str, name: &str) {
        self.sanitized.insert(QualName::new(schema, name));
    }
}

/// A protected column as it reaches a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedColumn {
    /// The table it is read from.
    pub table: QualName,
    /// The column.
    pub column: String,
    /// The policy's rule for it.
    pub rule: String,
}

/// One column of a statement's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputColumn {
    /// Relayed as it is.
    Plain,
    /// The raw value of a protected column: the proxy sanitizes it.
    Protected(ProtectedColumn),
    /// A value of a type that a role other than a superuser owns (see
    /// [`RelationInfo::opaque`]): relayed as it is, but, like a protected
    /// column, never fed to a cast, function, operator or clause.
    Opaque {
        /// The column (or row) it comes from.
        column: String,
        /// Its type.
        type_name: String,
    },
}

impl OutputColumn {
    /// Whether it is protected (sanitized on output).
    pub fn is_protected(&self) -> bool {
        matches!(self, OutputColumn::Protected(_))
    }

    /// Whether it may only be output bare: protected, or of a type
    /// another role owns.
    pub fn is_restricted(&self) -> bool {
        !matches!(self, OutputColumn::Plain)
    }

    /// `table.column` of a protected column, for refusals that name it;
    /// `?` for any other.
    pub fn protected_name(&self) -> String {
        match self {
            OutputColumn::Protected(p) => format!("{}.{}", p.table, p.column),
            _ => "?".to_owned(),
        }
    }
}

/// The kinds of statement that are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementKind {
    /// `SELECT`, `VALUES`, `TABLE`, with `WITH` and set operations.
    Select,
    /// `DECLARE ... CURSOR FOR`.
    DeclareCursor,
    /// `FETCH`.
    Fetch,
    /// `MOVE`.
    Move,
    /// `CLOSE`.
    Close,
    /// `BEGIN`, `START TRANSACTION`, `COMMIT`, `ROLLBACK`, `SAVEPOINT`,
    /// `RELEASE`, `ROLLBACK TO`.
    Transaction,
    /// `SHOW`.
    Show,
    /// `SET`, `RESET`, `SET TRANSACTION`.
    Set,
    /// `DISCARD`.
    Discard,
    /// `DEALLOCATE`.
    Deallocate,
    /// `PREPARE`.
    Prepare,
    /// `EXECUTE`.
    Execute,
    /// No statement at all (an empty string, only comments or
    /// semicolons): the server runs nothing and answers an `Execute` of it
    /// with EmptyQueryResponse.
    Empty,
}

impl StatementKind {
    /// Whether a statement of this kind runs what a cursor or prepared
    /// statement name stands for when the server runs it (`FETCH`,
    /// `EXECUTE`): its analysis read that name as the session stood then,
    /// and the name may be declared again, over other columns, before a
    /// statement parsed now is bound, or while a pipelined `DECLARE` is
    /// on its way.
    pub fn runs_named(self) -> bool {
        matches!(self, StatementKind::Fetch | StatementKind::Execute)
    }
}

/// A change to the session's named cursors and prepared statements that a
/// statement makes when the server completes it: apply it with
/// [`Session::apply`] only then (a statement that fails changes nothing,
/// and a name the server still holds must keep its old plan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// `PREPARE name`: `EXECUTE name` returns `output`.
    Prepare {
        /// The statement name.
        name: String,
        /// Its result columns.
        output: Vec<OutputColumn>,
    },
    /// `DEALLOCATE name`, or every name when `None`.
    Deallocate(Option<String>),
    /// `DECLARE name CURSOR`: `FETCH ... name` returns `output`.
    Declare {
        /// The cursor name.
        name: String,
        /// Its result columns.
        output: Vec<OutputColumn>,
    },
    /// `CLOSE name`, or every cursor when `None`.
    Close(Option<String>),
    /// `DISCARD ALL`: no prepared statements, no cursors.
    DiscardAll,
}

/// What a statement does to the session's `search_path`, once the server
/// has committed it: the analysis of later statements must then resolve
/// names with the server's new path (the proxy's session follows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathChange {
    /// `SET [SESSION] search_path TO ...` (or `= ...`): a path only the
    /// server resolves as it will search it (schemas that do not exist or
    /// that the role may not use are skipped, `$user` replaced), so the
    /// proxy asks the server for it.
    Set,
    /// `RESET search_path`, `SET search_path TO DEFAULT`, `RESET ALL`,
    /// `DISCARD ALL`: back to the session's default, the path it started
    /// with.
    Reset,
}

/// One analyzed statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementAnalysis {
    /// Its kind.
    pub kind: StatementKind,
    /// The columns of the rows it returns, in order (empty when it
    /// returns none). `SHOW` returns one plain column, `SHOW ALL` three
    /// (name, setting, description).
    pub output: Vec<OutputColumn>,
    /// What it changes in the [`Session`] once completed.
    pub effect: Option<Effect>,
    /// What it changes in the search path once committed.
    pub search_path: Option<PathChange>,
}

/// A whole query string: one analysis per statement, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Analysis {
    /// The statements.
    pub statements: Vec<StatementAnalysis>,
    /// The text to forward instead of the client's: the same statements
    /// with every name qualified as the analysis resolved it (the
    /// client's text itself when nothing needed qualifying).
    pub forward: Arc<str>,
}

/// What a session has prepared and declared, as far as the proxy saw it
/// completed. Protocol-level names share these name spaces: a `Parse` of
/// a named statement must be recorded with [`Session::record_statement`]
/// and a `Bind` to a named portal with [`Session::record_portal`], since
/// SQL `EXECUTE` and `FETCH` reach them too.
#[derive(Debug, Clone, Default)]
pub struct Session {
    prepared: HashMap<String, Vec<OutputColumn>>,
    cursors: HashMap<String, Vec<OutputColumn>>,
}

impl Session {
    /// A session with nothing prepared.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies a completed statement's effect.
    pub fn apply(&mut self, effect: &Effect) {
        match effect {
            Effect::Prepare { name, output } => self.record_statement(name, output.clone()),
            Effect::Deallocate(Some(name)) => {
                self.prepared.remove(name);
            }
            Effect::Deallocate(None) => self.prepared.clear(),
            Effect::Declare { name, output } => self.record_portal(name, output.clone()),
            Effect::Close(Some(name)) => {
                self.cursors.remove(name);
            }
            Effect::Close(None) => self.cursors.clear(),
            Effect::DiscardAll => {
                self.prepared.clear();
                self.cursors.clear();
            }
        }
    }

    /// Records a prepared statement (SQL or protocol level) and what
    /// executing it returns.
    pub fn record_statement(&mut self, name: &str, output: Vec<OutputColumn>) {
        self.prepared.insert(name.to_owned(), output);
    }

    /// Records a cursor or protocol-level portal and what fetching from it
    /// returns.
    pub fn record_portal(&mut self, name: &str, output: Vec<OutputColumn>) {
        self.cursors.insert(name.to_owned(), output);
    }

    /// What `EXECUTE name` returns, if the statement is known.
    pub fn prepared(&self, name: &str) -> Option<&[OutputColumn]> {
        self.prepared.get(name).map(Vec::as_slice)
    }

    /// What `FETCH ... name` returns, if the cursor is known.
    pub fn cursor(&self, name: &str) -> Option<&[OutputColumn]> {
        self.cursors.get(name).map(Vec::as_slice)
    }
}

/// What an analysis reads: the catalog, the policy, the session's
/// `search_path` and user (for `$user`), and the shared parse cache.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// Relations, functions, operators, types.
    pub catalog: &'a dyn Catalog,
    /// Protected columns and the lists.
    pub policy: &'a Policy,
    /// The session's `search_path`, entries unquoted, in order.
    pub search_path: &'a [String],
    /// The session user, for `$user` in the path.
    pub user: &'a str,
    /// Parse trees by statement text.
    pub cache: &'a ParseCache,
}

/// Analyzes a simple-protocol query string: every statement is checked,
/// and a refusal of any refuses the whole string (its index is in
/// [`Refusal::statement`]). Later statements see the effects of earlier
/// ones (`PREPARE p ...; EXECUTE p`), `session` itself is not changed.
pub fn analyze(sql: &str, ctx: &Context<'_>, session: &Session) -> Result<Analysis, Refusal> {
    let tree = ctx.cache.parse(sql)?;
    let mut view = session.clone();
    let mut statements = Vec::with_capacity(tree.stmts.len());
    let mut relations = Vec::with_capacity(tree.stmts.len());
    for (i, raw) in tree.stmts.iter().enumerate() {
        let (s, rels) = statement::analyze(raw, ctx, &view).map_err(|mut r| {
            r.statement = i;
            r
        })?;
        if let Some(e) = &s.effect {
            view.apply(e);
        }
        statements.push(s);
        relations.push(rels);
    }
    let forward = ctx.cache.forward(sql, &tree, &relations)?;
    Ok(Analysis {
        statements,
        forward,
    })
}

/// Analyzes the text of an extended-protocol `Parse` message: exactly one
/// statement, `$n` parameters allowed.
pub fn analyze_parse(
    sql: &str,
    ctx: &Context<'_>,
    session: &Session,
) -> Result<StatementAnalysis, Refusal> {
    analyze_parse_forward(sql, ctx, session).map(|(a, _)| a)
}

/// [`analyze_parse`], and the text to forward in the `Parse` message
/// instead of the client's (see [`Analysis::forward`]).
pub fn analyze_parse_forward(
    sql: &str,
    ctx: &Context<'_>,
    session: &Session,
) -> Result<(StatementAnalysis, Arc<str>), Refusal> {
    let tree = ctx.cache.parse(sql)?;
    match tree.stmts.as_slice() {
        // A Parse of nothing, as PostgreSQL allows: no rows, no effect.
        [] => {
            let forward = ctx.cache.forward(sql, &tree, &[])?;
            let empty = StatementAnalysis {
                kind: StatementKind::Empty,
                output: Vec::new(),
                effect: None,
                search_path: None,
            };
            Ok((empty, forward))
        }
        [raw] => {
            let (a, rels) = statement::analyze(raw, ctx, session)?;
            let forward = ctx.cache.forward(sql, &tree, &[rels])?;
            Ok((a, forward))
        }
        _ => Err(Refusal::new(
            Rule::StatementKind,
            format!(
                "a Parse message must hold exactly one statement, this one holds {}",
                tree.stmts.len()
            ),
        )),
    }
}
