//! What the analyzer needs to know about the database: relations with
//! their columns, functions, operators and types, looked up by name.
//!
//! The proxy fills a [`MemoryCatalog`] over its control connection before
//! a session's statements are analyzed (the analyzer itself never waits on
//! the network); tests fill one by hand.

use std::collections::{BTreeMap, HashMap};

use super::QualName;

/// What kind of relation a name denotes (`pg_class.relkind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelationKind {
    /// An ordinary or partitioned table (`r`, `p`).
    Table,
    /// A view (`v`).
    View,
    /// A materialized view (`m`).
    MaterializedView,
    /// Anything else: sequences, foreign tables, TOAST tables, indexes.
    Other,
}

/// A relation as the catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationInfo {
    /// Its schema.
    pub schema: String,
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: RelationKind,
    /// Its columns in `attnum` order, dropped columns left out: `*`
    /// expands to these.
    pub columns: Vec<String>,
    /// The tables it inherits from or is a partition of, transitively: a
    /// column protected on an ancestor is protected here too.
    pub ancestors: Vec<QualName>,
    /// Columns whose type a role that is not a superuser owns (an enum, a
    /// domain, a table's row type), or may make run its code (a
    /// superuser's domain over such a type or whose CHECK calls such a
    /// role's function, an array or composite of such types), by column,
    /// with the type's name. That role may attach a cast to the type,
    /// implicit or not, or a CHECK to a domain, whose function then runs
    /// on the column's values (or on a literal coerced to the type) with
    /// the session's raw reads: such columns may only be output bare.
    pub opaque: BTreeMap<String, String>,
    /// The relation's row type, when a role that is not a superuser owns
    /// it (the table's owner) or may make it run its code (a column's
    /// type): whole-row references may only be output bare, for the same
    /// reason.
    pub opaque_row: Option<String>,
    /// Set when the relation belongs to a hierarchy of partitions or
    /// inheritance children that a protected column splits: which
    /// member a row is stored in then says something of its value, so
    /// the relation is not read at all (see [`Split`]).
    pub split: Option<Split>,
    /// Set when a row-level security policy that applies to the session
    /// filters the relation's rows by a protected column, or by what the
    /// proxy cannot follow: which rows the session sees then says
    /// something of those values, so the relation is not read at all
    /// (see [`RowSecurity`]).
    pub row_security: Option<RowSecurity>,
    /// Set when a role the proxy does not trust owns the relation or a
    /// member of its hierarchy: the owner may change it during the
    /// session (into a view, with a row-level security policy, a column
    /// of its own type) so that a read runs the owner's code with the
    /// session's raw reads, so the relation is not read at all (see
    /// [`UntrustedOwner`]).
    pub untrusted_owner: Option<UntrustedOwner>,
    /// Set when an index of the relation, or of a partition or child of
    /// it, orders or chooses rows by a protected column: the planner may
    /// scan it, and the order or the rows a read returns then follow the
    /// raw values, so the relation is not read at all (see
    /// [`ProtectedIndex`]).
    pub protected_index: Option<ProtectedIndex>,
    /// Sets of columns whose values no two rows read from the relation
    /// share, none of them null, compared as `ORDER BY` compares them: the
    /// key columns of a valid, immediate unique index without expressions
    /// or predicate, over `NOT NULL` columns, with their types' default
    /// btree operator classes and their own collations, on a table without
    /// inheritance children (or on a partitioned table, whose unique
    /// indexes hold across its partitions). An `ORDER BY` over all of one
    /// set is a total order: no ties, so whatever the server holds while
    /// it sorts cannot reorder anything.
    pub unique_keys: Vec<Vec<String>>,
    /// Generated columns whose stored values are computed from a
    /// protected column (of the relation, or of a partition or child of
    /// it, whose rows a read returns), or by a function outside
    /// `pg_catalog`: by column, what it reads (`protected column note`).
    /// They may not be read at all.
    pub derived: BTreeMap<String, String>,
}

/// A relation, of the hierarchy of the one read (itself, an ancestor
/// or a descendant), whose owner the proxy does not trust: not a
/// superuser, not the owner of a relation that carries rules or of a
/// sanitized one, not in `masking.trusted_owners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UntrustedOwner {
    /// The relation that role owns.
    pub relation: QualName,
    /// The role (`pg_class.relowner`).
    pub owner: String,
}

/// An index whose key columns, key expressions or predicate read a
/// protected column: an index scan returns rows in the order of the raw
/// values (with or without `ORDER BY`), and a partial index holds the rows
/// whose values pass its predicate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedIndex {
    /// The index.
    pub index: QualName,
    /// The table it is on (the relation read, or a partition or child of
    /// it).
    pub table: QualName,
    /// The protected column it reads.
    pub column: String,
}

/// Why a relation's partitions or inheritance children hold rows chosen
/// by a protected value: `relation` (the relation itself, an ancestor or
/// a descendant of it) is partitioned by, or has a CHECK constraint on,
/// the protected `column`. The member a row is in (its `tableoid`, its
/// `ctid` restarting in each member, the order an unordered read returns
/// rows in, a read or a count of one member) then tells which partition
/// bounds or constraint its value satisfies, and those are definitions
/// anyone reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The relation whose partition key or CHECK constraint reads the
    /// protected column.
    pub relation: QualName,
    /// The protected column.
    pub column: String,
    /// Partition key or CHECK constraint.
    pub by: SplitBy,
}

/// What splits a hierarchy (see [`Split`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitBy {
    /// The partition key (a column of it, or a column an expression of it
    /// reads).
    PartitionKey,
    /// A CHECK constraint that not every member of the hierarchy has.
    Check,
}

/// A row-level security policy of a relation that reads what the session
/// may not see raw: every row a read returns satisfies its `USING`
/// expression, so the rows, and their count, tell which values pass it.
/// A policy of a table applies to reads of that table only (a partition
/// read directly is filtered by its own policies, not its parent's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSecurity {
    /// The policy's name (`pg_policy.polname`).
    pub policy: String,
    /// What it reads that makes it unsafe.
    pub reads: PolicyReads,
}

/// What makes a policy unsafe (see [`RowSecurity`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyReads {
    /// A protected column of the relation (by name, or through a whole-row
    /// reference).
    Column(String),
    /// A subquery: it may read protected columns of any table, under
    /// that table's own policies, which are out of the proxy's reach.
    Subquery,
    /// A function the proxy cannot see through (one not in `pg_catalog`,
    /// VOLATILE, or on the deny-list), by name: it may read any table.
    Function(String),
    /// A construct the proxy does not follow, by the name PostgreSQL's
    /// node tree gives it.
    Construct(String),
}

/// `pg_proc.provolatile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Volatility {
    /// `i`: cannot read the database or change anything.
    Immutable,
    /// `s`: may read the database and settings, changes nothing.
    Stable,
    /// `v`: anything.
    Volatile,
}

/// `pg_proc.prokind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunctionKind {
    /// A plain function (`f`).
    Function,
    /// An aggregate (`a`).
    Aggregate,
    /// A window function (`w`).
    Window,
    /// A procedure (`p`).
    Procedure,
}

/// One function of a given name (one overload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionInfo {
    /// The schema it lives in.
    pub schema: String,
    /// Its volatility.
    pub volatility: Volatility,
    /// Plain, aggregate, window or procedure.
    pub kind: FunctionKind,
}

/// One operator of a given symbol (one overload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorInfo {
    /// The schema the operator lives in.
    pub schema: String,
    /// The function that implements it (`pg_operator.oprcode`).
    pub function: QualName,
    /// That function's volatility.
    pub volatility: Volatility,
}

/// Look-ups by name. Every method answers from memory.
pub trait Catalog {
    /// The relation `schema.name`, if there is one.
    fn relation(&self, schema: &str, name: &str) -> Option<RelationInfo>;
    /// Every function called `name`, in every schema.
    fn functions(&self, name: &str) -> Vec<FunctionInfo>;
    /// Every operator with symbol `symbol`, in every schema.
    fn operators(&self, symbol: &str) -> Vec<OperatorInfo>;
    /// The schemas that hold a type called `name`.
    fn type_schemas(&self, name: &str) -> Vec<String>;
}

/// A catalog held in maps.
#[derive(Debug, Clone, Default)]
pub struct MemoryCatalog {
    relations: HashMap<(String, String), RelationInfo>,
    functions: HashMap<String, Vec<FunctionInfo>>,
    operators: HashMap<String, Vec<OperatorInfo>>,
    types: HashMap<String, Vec<String>>,
}

impl MemoryCatalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a relation.
    pub fn add_relation(&mut self, relation: RelationInfo) {
        self.relations
            .insert((relation.schema.clone(), relation.name.clone()), relation);
    }

    /// Adds a function overload `name` in `schema`.
    pub fn add_function(
        &mut self,
        schema: &str,
        name: &str,
        volatility: Volatility,
        kind: FunctionKind,
    ) {
        self.functions
            .entry(name.to_owned())
            .or_default()
            .push(FunctionInfo {
                schema: schema.to_owned(),
                volatility,
                kind,
            });
    }

    /// Adds an operator overload `symbol` in `schema`, implemented by
    /// `function` of the given volatility.
    pub fn add_operator(
        &mut self,
        schema: &str,
        symbol: &str,
        function: QualName,
        volatility: Volatility,
    ) {
        self.operators
            .entry(symbol.to_owned())
            .or_default()
            .push(OperatorInfo {
                schema: schema.to_owned(),
                function,
                volatility,
            });
    }

    /// Adds a type `name` in `schema`.
    pub fn add_type(&mut self, schema: &str, name: &str) {
        self.types
            .entry(name.to_owned())
            .or_default()
            .push(schema.to_owned());
    }
}

impl Catalog for MemoryCatalog {
    fn relation(&self, schema: &str, name: &str) -> Option<RelationInfo> {
        self.relations
            .get(&(schema.to_owned(), name.to_owned()))
            .cloned()
    }

    fn functions(&self, name: &str) -> Vec<FunctionInfo> {
        self.functions.get(name).cloned().unwrap_or_default()
    }

    fn operators(&self, symbol: &str) -> Vec<OperatorInfo> {
        self.operators.get(symbol).cloned().unwrap_or_default()
    }

    fn type_schemas(&self, name: &str) -> Vec<String> {
        self.types.get(name).cloned().unwrap_or_default()
    }
}

/// The schemas PostgreSQL searches for an unqualified name: `pg_catalog`
/// first unless the path names it, then the path in order, `$user`
/// replaced by `user`. Temporary schemas are not searched: a masked
/// session cannot create temporary objects (DDL is refused).
pub fn effective_path(search_path: &[String], user: &str) -> Vec<String> {
    let mut path = Vec::with_capacity(search_path.len() + 1);
    if !search_path.iter().any(|s| s == "pg_catalog") {
        path.push("pg_catalog".to_owned());
    }
    for s in search_path {
        let s = if s == "$user" { user } else { s.as_str() };
        if s.starts_with("pg_temp") || s.is_empty() {
            continue;
        }
        if !path.iter().any(|p| p == s) {
            path.push(s.to_owned());
        }
    }
    path
}

/// Resolves a possibly-qualified relation name the way PostgreSQL does:
/// a qualified name as it is, an unqualified one in the first schema of
/// `path` that has it.
pub fn resolve_relation(
    catalog: &dyn Catalog,
    path: &[String],
    schema: Option<&str>,
    name: &str,
) -> Option<RelationInfo> {
    match schema {
        Some(s) => catalog.relation(s, name),
        None => path.iter().find_map(|s| catalog.relation(s, name)),
    }
}
