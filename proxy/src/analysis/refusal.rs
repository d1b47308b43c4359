//! Why a statement was refused: a rule with a stable short code, and a
//! message that names statement kinds, relations, columns, functions and
//! settings but never quotes a literal of the statement (literals may
//! hold data).

/// The rule that refused a statement. [`Rule::code`] is stable: tests,
/// logs and documentation use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// PostgreSQL's grammar does not accept the text.
    ParseError,
    /// The statement kind is not on the allow-list.
    StatementKind,
    /// `SELECT ... FOR UPDATE/SHARE` and the like take row locks.
    RowLocking,
    /// A construct outside the analyzed subset (`TABLESAMPLE`,
    /// `XMLTABLE`, a `BINARY` cursor...).
    ConstructNotAllowed,
    /// A relation name that the catalog does not resolve.
    RelationUnresolved,
    /// A relation that is neither a table nor declared sanitized.
    RelationKind,
    /// A catalog relation that is not on the catalog allow-list.
    CatalogRelation,
    /// A relation of a hierarchy of partitions or inheritance children
    /// that a protected column splits (partition key, CHECK constraint):
    /// the member a row is in would tell its value's range.
    ProtectedPartition,
    /// A relation with a row-level security policy, applying to the
    /// session, that reads a protected column (or something the proxy
    /// cannot follow): the rows it lets through would tell which values
    /// pass it.
    ProtectedPolicy,
    /// A relation owned by a role the proxy does not trust (or of a
    /// hierarchy with a member that is): its owner could change it during
    /// the session so that a read runs the owner's code.
    UntrustedOwner,
    /// A relation with an index (its own, or a partition's or child's)
    /// whose key or predicate reads a protected column: an index scan
    /// returns rows in the raw values' order, or only those passing the
    /// predicate.
    ProtectedIndex,
    /// A catalog column that counts a relation's rows or pages
    /// (`pg_class.reltuples`...), in a session with protected columns.
    RelationSize,
    /// A generated column computed from a protected column (its stored
    /// values are functions of the raw ones: a length, a flag, a search
    /// vector), or by a function outside `pg_catalog`, which may read any
    /// column.
    DerivedColumn,
    /// The same protected column output twice by one statement: the
    /// server builds a row of every copy of the raw value (and fails past
    /// 1 GiB), the proxy judges it by the sanitized copies, which a rule
    /// may make much shorter.
    ProtectedRepeated,
    /// A system column that tells where a row is stored (`ctid`), of a
    /// table with protected columns: how rows fill pages depends on the
    /// lengths of their values.
    RowLocation,
    /// A transaction column (`xmin`, `xmax`, `cmin`, `cmax`) of a table
    /// (not a catalog): a row lock, `UPDATE` or `DELETE` leaves its
    /// transaction's ID in `xmax`, after a `ROLLBACK` too, so the rows an
    /// owner's statement chose by raw values of another table show.
    TransactionColumn,
    /// The policy protects a column that the table does not have.
    PolicyMismatch,
    /// A column reference that names no column in scope.
    ColumnUnresolved,
    /// A column reference that names more than one column in scope.
    ColumnAmbiguous,
    /// A column reference, `NATURAL` join or `USING` column that could
    /// bind to an output column whose name the analyzer cannot be certain
    /// PostgreSQL gives it the same way (an expression without an alias).
    ColumnNameUncertain,
    /// A protected column inside an expression of the select list.
    ProtectedInExpression,
    /// A protected column in `WHERE`.
    ProtectedInWhere,
    /// A protected column in `HAVING`.
    ProtectedInHaving,
    /// A protected column in `JOIN ... ON` or `USING`, or a natural join
    /// on it.
    ProtectedInJoin,
    /// A protected column in `GROUP BY`.
    ProtectedInGroupBy,
    /// A protected column in `ORDER BY`.
    ProtectedInOrderBy,
    /// A protected column under `DISTINCT` or in `DISTINCT ON`.
    ProtectedInDistinct,
    /// A protected column in a window definition or window function.
    ProtectedInWindow,
    /// A protected column in an aggregate's arguments, order or filter.
    ProtectedInAggregate,
    /// A protected column in `LIMIT` or `OFFSET`.
    ProtectedInLimit,
    /// A protected column as the output of a subquery whose output is
    /// consumed (scalar, `IN`, `ANY`, `ARRAY`).
    ProtectedInSubquery,
    /// A protected column in a branch of `UNION`/`INTERSECT`/`EXCEPT`.
    ProtectedInSetOperation,
    /// A protected column output by a select the server would sort, hash
    /// or hold rows of: not one table alone, or with `ORDER BY`, grouping,
    /// `DISTINCT`, window functions, subqueries or `WITH`.
    ProtectedWithBuffering,
    /// A protected column in `VALUES` or a function in `FROM`.
    ProtectedInValues,
    /// A whole-row reference to a relation with protected columns.
    WholeRowReference,
    /// A function that is not allowed.
    FunctionNotAllowed,
    /// A function in `FROM` that is not an allowed set-returning function.
    FunctionInFrom,
    /// A catalog function given a value read from a table or a subquery
    /// rather than from the catalog.
    CatalogFunctionArgument,
    /// An operator that is not allowed.
    OperatorNotAllowed,
    /// A type outside `pg_catalog` (casts and type input run its code).
    TypeNotAllowed,
    /// A setting that may not be set or shown.
    SettingNotAllowed,
    /// `FETCH` of a cursor the proxy did not see declared.
    CursorUnknown,
    /// `EXECUTE` of a statement the proxy did not see prepared.
    PreparedUnknown,
    /// Nesting deeper than the analyzer follows.
    TooComplex,
    /// The statement passed the analysis but could not be rewritten with
    /// every name qualified as the analysis resolved it (or the rewrite
    /// did not survive deparsing): it is not forwarded.
    QualificationFailed,
}

impl Rule {
    /// The stable short code.
    pub fn code(self) -> &'static str {
        match self {
            Rule::ParseError => "parse_error",
            Rule::StatementKind => "statement_kind",
            Rule::RowLocking => "row_locking",
            Rule::ConstructNotAllowed => "construct_not_allowed",
            Rule::RelationUnresolved => "relation_unresolved",
            Rule::RelationKind => "relation_kind",
            Rule::CatalogRelation => "catalog_relation",
            Rule::ProtectedPartition => "protected_partition",
            Rule::ProtectedPolicy => "protected_policy",
            Rule::UntrustedOwner => "untrusted_owner",
            Rule::ProtectedIndex => "protected_index",
            Rule::RelationSize => "relation_size",
            Rule::DerivedColumn => "derived_column",
            Rule::ProtectedRepeated => "protected_repeated",
            Rule::RowLocation => "row_location",
            Rule::TransactionColumn => "transaction_column",
            Rule::PolicyMismatch => "policy_mismatch",
            Rule::ColumnUnresolved => "column_unresolved",
            Rule::ColumnAmbiguous => "column_ambiguous",
            Rule::ColumnNameUncertain => "column_name_uncertain",
            Rule::ProtectedInExpression => "protected_in_expression",
            Rule::ProtectedInWhere => "protected_in_where",
            Rule::ProtectedInHaving => "protected_in_having",
            Rule::ProtectedInJoin => "protected_in_join",
            Rule::ProtectedInGroupBy => "protected_in_group_by",
            Rule::ProtectedInOrderBy => "protected_in_order_by",
            Rule::ProtectedInDistinct => "protected_in_distinct",
            Rule::ProtectedInWindow => "protected_in_window",
            Rule::ProtectedInAggregate => "protected_in_aggregate",
            Rule::ProtectedInLimit => "protected_in_limit",
            Rule::ProtectedInSubquery => "protected_in_subquery",
            Rule::ProtectedInSetOperation => "protected_in_set_operation",
            Rule::ProtectedWithBuffering => "protected_with_buffering",
            Rule::ProtectedInValues => "protected_in_values",
            Rule::WholeRowReference => "whole_row_reference",
            Rule::FunctionNotAllowed => "function_not_allowed",
            Rule::FunctionInFrom => "function_in_from",
            Rule::CatalogFunctionArgument => "catalog_function_argument",
            Rule::OperatorNotAllowed => "operator_not_allowed",
            Rule::TypeNotAllowed => "type_not_allowed",
            Rule::SettingNotAllowed => "setting_not_allowed",
            Rule::CursorUnknown => "cursor_unknown",
            Rule::PreparedUnknown => "prepared_unknown",
            Rule::TooComplex => "too_complex",
            Rule::QualificationFailed => "qualification_failed",
        }
    }

    /// The SQLSTATE a client sees: `42601` (syntax_error) for text the
    /// grammar refuses, `54001` (statement_too_complex) for nesting, and
    /// `42501` (insufficient_privilege) for everything the policy refuses.
    pub fn sqlstate(self) -> &'static str {
        match self {
            Rule::ParseError => "42601",
            Rule::TooComplex => "54001",
            _ => "42501",
        }
    }
}

/// A refused statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The rule that refused it.
    pub rule: Rule,
    /// What was refused, in words; never a literal of the statement.
    pub message: String,
    /// The statement's index in a multi-statement string (0 for the
    /// first or only one).
    pub statement: usize,
}

impl Refusal {
    /// A refusal by `rule` (statement index 0; [`super::analyze`] sets it).
    pub fn new(rule: Rule, message: impl Into<String>) -> Self {
        Refusal {
            rule,
            message: message.into(),
            statement: 0,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dptext-proxy: statement refused ({}): {}",
            self.rule.code(),
            self.message
        )
    }
}

impl std::error::Error for Refusal {}

/// A parser message without what follows `at or near` (the token there may
/// be a literal) and without anything quoted.
pub(super) fn parse_message(raw: &str) -> String {
    let cut = [" at or near", "\""]
        .iter()
        .filter_map(|m| raw.find(m))
        .min()
        .unwrap_or(raw.len());
    let msg = raw[..cut].trim();
    if msg.is_empty() {
        "the statement does not parse".to_owned()
    } else {
        msg.to_owned()
    }
}
