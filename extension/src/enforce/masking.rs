//! Masking at the source: what a masked session may read, decided here;
//! the query-tree rewrite that enforces it lives in [`crate::enforce::rewrite`].
//!
//! A session is **masked** when its login role (`session_user`) or its
//! current role is labelled `SECURITY LABEL FOR dptext ON ROLE r IS
//! 'MASKED'`. In a masked session every read of a labelled column goes
//! through [`dptext::mask`], so the session never computes on a raw value:
//! every number, symbol, error field or notification it can produce is a
//! function of sanitized text only (post-processing), which cannot weaken
//! the rule's guarantee. Outputs are keyed, so asking again returns the
//! same text; without a key masked reads are refused.
//!
//! Decisions are cached per backend and the caches are dropped on every
//! relation-cache invalidation, which label changes send (see
//! [`crate::enforce::hooks`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use pgrx::pg_sys::Oid;
use pgrx::prelude::*;

use crate::error::refuse;
use crate::pg::lookup::{lookup, read_one, read_two};

/// One masked column of a relation: the rule its label (or an ancestor's
/// or descendant's label on the same-named column) states.
#[derive(Debug, Clone)]
pub(crate) struct ColumnRule {
    /// The column's number in this relation.
    pub attnum: i16,
    /// The mechanism's name.
    pub mechanism: String,
    /// Its parameters, every default filled in, as JSON text.
    pub params: String,
    /// `GROUPED BY`: the number of the column whose value in the row is
    /// the date shift's grouping value.
    pub group: Option<i16>,
}

/// What a masked session may do with one relation.
#[derive(Debug)]
pub(crate) enum RelationPolicy {
    /// No rule: read and write as usual.
    Plain,
    /// Labelled columns, read only through their rules.
    Masked(Vec<ColumnRule>),
    /// A materialized view whose query reads labelled columns other than by
    /// copying them, or cannot be followed, and that
    /// `create_sanitized_view` did not build: its columns without a rule may
    /// hold what raw values decided. Columns with a rule (its own, or a
    /// copied column's) are read through it; reading any other is refused
    /// (the text says why).
    Derived {
        /// The matview's own rules.
        rules: Vec<ColumnRule>,
        /// Why unlabelled columns are refused.
        why: String,
    },
    /// A relation masked sessions may not read at all, not even
    /// `count(*)`: a materialized view whose stored rows (which exist, in
    /// what order, what they hold) raw labelled values decided. Its masked
    /// columns would still come back in the stored order, and its row
    /// count counts raw matches.
    Refused(String),
}

impl RelationPolicy {
    /// The rule of column `attnum`, if it has one.
    pub fn rule(&self, attnum: i16) -> Option<&ColumnRule> {
        match self {
            RelationPolicy::Masked(rules) | RelationPolicy::Derived { rules, .. } => {
                rules.iter().find(|r| r.attnum == attnum)
            }
            RelationPolicy::Plain | RelationPolicy::Refused(_) => None,
        }
    }

    /// Why a masked session may not read column `attnum` at all, if so.
    pub fn refuses_column(&self, attnum: i16) -> Option<String> {
        match self {
            RelationPolicy::Derived { why, .. } if self.rule(attnum).is_none() => Some(why.clone()),
            RelationPolicy::Refused(why) => Some(why.clone()),
            _ => None,
        }
    }

    /// True when a masked session may not write the relation.
    pub fn protects(&self) -> bool {
        !matches!(self, RelationPolicy::Plain)
    }
}

thread_local! {
    /// Policy per relation.
    static RELATIONS: RefCell<HashMap<Oid, Rc<RelationPolicy>>> = RefCell::new(HashMap::new());
    /// Oids of the functions the rewrite calls, by signature.
    static FUNCTIONS: RefCell<HashMap<&'static str, Oid>> = RefCell::new(HashMap::new());
    /// Why masked sessions may not read a relation whose family's rows were
    /// placed by raw values ([`family_refusal`]; `None`: they may).
    static FAMILIES: RefCell<HashMap<Oid, Option<String>>> = RefCell::new(HashMap::new());
    /// Whether a relation is a child of plain inheritance (has a parent in
    /// `pg_inherits` and is not a partition).
    static CHILDREN: RefCell<HashMap<Oid, bool>> = RefCell::new(HashMap::new());
    /// Per index: the table it is on and the columns it reads (`None`:
    /// not an index), and whether one of them is a column masked sessions
    /// read only masked (or not at all).
    static INDEXES: RefCell<HashMap<Oid, Rc<IndexReads>>> = RefCell::new(HashMap::new());
    /// Columns labelled `ALLOW` (declared safe to read raw), per relation,
    /// filled with its policy ([`relation_policy`]).
    static ALLOWED: RefCell<HashMap<Oid, Rc<Vec<i16>>>> = RefCell::new(HashMap::new());
    /// Why a relation may not be read with its partitions or children (a
    /// column of theirs has another rule than the relation's), filled with
    /// its policy ([`relation_policy`]).
    static DISAGREEING: RefCell<HashMap<Oid, String>> = RefCell::new(HashMap::new());
}

/// A column rule as spelled in its label: mechanism, canonical
/// parameters, grouping column.
type SpelledRule = (String, String, Option<String>);

/// Why relation `relid` may not be read with its partitions or children
/// by a masked session (one of them has a column rule of its own that
/// differs from the relation's); `None` when it may. Known once the
/// relation's policy was computed ([`relation_policy`]).
pub(crate) fn children_disagree(relid: Oid) -> Option<String> {
    DISAGREEING.with(|d| d.borrow().get(&relid).cloned())
}

/// Drops every cached decision; called on relation-cache invalidations.
pub(crate) fn invalidate() {
    crate::session::invalidate();
    RELATIONS.with(|r| r.borrow_mut().clear());
    ALLOWED.with(|a| a.borrow_mut().clear());
    DISAGREEING.with(|d| d.borrow_mut().clear());
    FAMILIES.with(|p| p.borrow_mut().clear());
    CHILDREN.with(|c| c.borrow_mut().clear());
    INDEXES.with(|i| i.borrow_mut().clear());
    FUNCTIONS.with(|f| f.borrow_mut().clear());
    // Cheap to refill (the engine keeps what it built), and a rule's
    // released vocabulary may have changed.
    super::mask::invalidate();
}

/// Refuses a masked write to relation `relid`, which has rules.
/// Refuses a masked write to a relation with a text column masked sessions
/// may not read ([`writes_denied`]).
pub(crate) fn refuse_denied_write(relid: Oid) -> ! {
    refuse(format!(
        "masked sessions cannot write {}: it has text columns without a dptext rule, and dptext.deny_unlabelled_text is on (an error's detail, a conflict or an index order would show them)",
        crate::pg::catalog::relation_name(relid)
    ))
}

pub(crate) fn refuse_write(relid: Oid) -> ! {
    refuse(format!(
        "masked sessions cannot write {}, which has dptext rules",
        crate::pg::catalog::relation_name(relid)
    ))
}

/// The policy of relation `relid`, from the cache or the catalog.
pub(crate) fn relation_policy(relid: Oid) -> Rc<RelationPolicy> {
    if let Some(p) = RELATIONS.with(|r| r.borrow().get(&relid).cloned()) {
        return p;
    }
    let p = Rc::new(lookup(|| read_policy(relid)));
    RELATIONS.with(|r| r.borrow_mut().insert(relid, p.clone()));
    p
}

/// Under `dptext.deny_unlabelled_text`: why a masked session may not read
/// columns `attnums` (0: the whole row) of relation `relid`, when one of
/// them is text-like ([`crate::pg::catalog::text_like_type`]) with
/// neither a rule nor an `ALLOW` label. The system catalogs and the
/// extension's own schema are exempt (their text is definitions, not
/// data people wrote).
pub(crate) fn unlabelled_text_refusal(relid: Oid, attnums: &[i16]) -> Option<String> {
    use crate::pg::catalog;
    let relkind = catalog::relkind(relid);
    if ![
        pg_sys::RELKIND_RELATION,
        pg_sys::RELKIND_PARTITIONED_TABLE,
        pg_sys::RELKIND_MATVIEW,
        pg_sys::RELKIND_FOREIGN_TABLE,
    ]
    .contains(&relkind)
    {
        return None;
    }
    let schema = catalog::relation_schema(relid);
    if matches!(
        schema.as_str(),
        "pg_catalog" | "information_schema" | "pg_toast" | "dptext"
    ) {
        return None;
    }
    let policy = relation_policy(relid);
    let allowed = ALLOWED
        .with(|m| m.borrow().get(&relid).cloned())
        .unwrap_or_default();
    let every: Vec<i16>;
    let read: &[i16] = if attnums.contains(&0) {
        every = (1..)
            .zip(catalog::dropped_columns(relid))
            .filter(|(_, gone)| !gone)
            .map(|(a, _)| a)
            .collect();
        &every
    } else {
        attnums
    };
    read.iter()
        .copied()
        .filter(|&a| a > 0 && policy.rule(a).is_none() && !allowed.contains(&a))
        .find(|&a| catalog::text_like_type(catalog::attribute_type(relid, a).0))
        .map(|a| {
            format!(
                "column {} of {} is text without a dptext rule, and dptext.deny_unlabelled_text is on: a privacy officer labels it (MASKED WITH a rule, or ALLOW if it is safe to read raw)",
                catalog::column_name(relid, a),
                catalog::relation_name(relid)
            )
        })
}

/// True when a masked session reads any of `attnums` of a relation with
/// `policy` only through a rule, or not at all (0: the whole row).
fn reads_protected(policy: &RelationPolicy, attnums: &[i16]) -> bool {
    policy.protects()
        && attnums
            .iter()
            .any(|&a| a == 0 || policy.rule(a).is_some() || policy.refuses_column(a).is_some())
}

/// Why masked sessions may not read `relid` at all, when the rows of its
/// inheritance or partition family were placed by raw values of a column
/// they read only masked:
///
/// - a partitioned table of the family (its own, an ancestor's, a
///   descendant's) is partitioned by such a column: which partition holds
///   a row is a function of its raw value, and `tableoid`, a read of one
///   partition, partition pruning and partition-wise plans all show it;
/// - a member of a family of more than one table has a CHECK constraint
///   on such a column (partitioning by inheritance: `CHECK (name < 'N')`
///   on one child): which child holds a row follows the raw value;
/// - a member is clustered on an index over such a column (`CLUSTER`):
///   its rows are stored in raw order, which any unordered read shows;
/// - any of these runs an owner's code (a partition key's operator class
///   or expression, a CHECK constraint, a clustered index's operator
///   class, expression or predicate), on a family with or without labels:
///   that code may look up a labelled column of any table, so which
///   member holds a row, or where, may follow raw values the family does
///   not hold (`PARTITION BY RANGE (id owner_ops)` whose comparison ranks
///   the patient's name).
pub(crate) fn family_refusal(relid: Oid) -> Option<String> {
    if let Some(p) = FAMILIES.with(|p| p.borrow().get(&relid).cloned()) {
        return p;
    }
    // The system catalogs place no row by a user's value.
    if relid.to_u32() < pg_sys::FirstNormalObjectId {
        return None;
    }
    type Row = (String, Oid, Vec<i16>, Option<String>, Option<Oid>, bool);
    let rows = lookup(|| -> Result<Vec<Row>, pgrx::spi::Error> {
        Spi::connect(|client| {
            let rows = client.select(FAMILY_PLACEMENT_SQL, None, &oid_arg(relid))?;
            let mut out = Vec::new();
            for row in rows {
                let (Some(kind), Some(table)) = (row.get::<String>(1)?, row.get::<Oid>(2)?) else {
                    continue;
                };
                let cols = row.get::<Vec<i16>>(3)?.unwrap_or_default();
                out.push((
                    kind,
                    table,
                    cols,
                    row.get::<String>(4)?,
                    row.get::<Oid>(5)?,
                    row.get::<bool>(6)?.unwrap_or(true),
                ));
            }
            Ok(out)
        })
    })
    .unwrap_or_else(|e| {
        refuse(format!(
            "could not read how the rows of a masked relation are placed: {e}"
        ))
    });
    let why = rows
        .into_iter()
        .find_map(|(kind, table, mut cols, exprs, index, owner_class)| {
            let (by_label, by_owner) = match index {
                // The index's own columns, not [`index_reads_protected`]:
                // that asks this function about the index's table.
                Some(index) => (
                    crate::pg::catalog::index_columns(index).is_some_and(|(table, cols)| {
                        reads_protected(&relation_policy(table), &cols)
                            || crate::guc::deny_unlabelled_text()
                                && unlabelled_text_refusal(table, &cols).is_some()
                    }),
                    crate::pg::catalog::index_runs_owner_code(index),
                ),
                None => {
                    cols.retain(|&a| a != 0);
                    let owner_expr = exprs
                        .as_deref()
                        .is_some_and(crate::pg::catalog::node_text_calls_owner_code);
                    if let Some(exprs) = exprs {
                        cols.extend(crate::pg::catalog::expression_columns(&exprs));
                    }
                    (
                        reads_protected(&relation_policy(table), &cols),
                        owner_class || owner_expr,
                    )
                }
            };
            let name = crate::pg::catalog::relation_name;
            if by_label {
                Some(format!(
                    "masked sessions cannot read {}: {} has a {kind} on a column with a dptext rule, so where a row is stored tells its raw value",
                    name(relid),
                    name(table)
                ))
            } else if by_owner {
                Some(format!(
                    "masked sessions cannot read {}: {} has a {kind} that runs code that is not built in (an operator class, a function or an operator), which may place rows by raw values of any table",
                    name(relid),
                    name(table)
                ))
            } else {
                None
            }
        });
    let why = why.or_else(|| distribution_refusal(relid));
    FAMILIES.with(|p| p.borrow_mut().insert(relid, why.clone()));
    why
}

/// Why masked sessions may not read `relid`, a Citus distributed table or
/// one of its shards, when the table is distributed by a column they read
/// only masked: which shard holds a row is a function of its raw value
/// (its hash, or its range), and `tableoid`, a read of one shard and the
/// public `get_shard_id_for_distribution_column` would test guesses
/// against it. Without Citus this is one catalog probe.
fn distribution_refusal(relid: Oid) -> Option<String> {
    let (table, key) = lookup(|| -> Result<(Oid, Option<String>), pgrx::spi::Error> {
        if !read_one::<bool>(HAS_DISTRIBUTION_SQL, &[])?.unwrap_or(false) {
            return Ok((relid, None));
        }
        let parent = shard_parent(relid);
        let table = if parent == Oid::INVALID {
            relid
        } else {
            parent
        };
        Ok((
            table,
            read_one::<String>(DISTRIBUTION_KEY_SQL, &oid_arg(table))?,
        ))
    })
    .unwrap_or_else(|e| {
        refuse(format!(
            "could not read how Citus distributes a masked relation: {e}"
        ))
    });
    let key = key?;
    let policy = relation_policy(table);
    let cols = crate::pg::catalog::expression_columns(&key);
    // A key that cannot be read is taken as labelled (fail closed).
    let by_label = policy.protects() && (cols.is_empty() || reads_protected(&policy, &cols));
    by_label.then(|| {
        format!(
            "masked sessions cannot read {}: {} is distributed by a column with a dptext rule, so which shard holds a row tells its raw value; distribute it by an unlabelled key",
            crate::pg::catalog::relation_name(relid),
            crate::pg::catalog::relation_name(table)
        )
    })
}

/// True when index `indexid` reads (by a key, an expression or its
/// predicate) a column that masked sessions read only through a rule or
/// not at all: masked planning never uses it (its order, and the counts
/// of a partial index, are functions of raw values), and masked sessions
/// see neither its `pg_class` row nor its statistics.
pub(crate) fn index_reads_protected(indexid: Oid) -> bool {
    let reads = match INDEXES.with(|i| i.borrow().get(&indexid).cloned()) {
        Some(r) => r,
        None => {
            let columns = crate::pg::catalog::index_columns(indexid);
            // Every index of a child of a labelled plain-inheritance
            // family counts: its statistics (expressions), its row count
            // (a partial index) and its order describe the rows the owner's
            // routing sent that child.
            // So does every index of a member of a family whose rows were
            // placed by raw values: its row count and statistics are the
            // member's, which masked sessions may not read.
            // And any index that runs an owner's code to order or match
            // (an operator class whose comparison looks names up, an
            // expression or predicate over a function that reads a
            // labelled column through a query): on any table, since the
            // code may read any.
            let labelled = columns.as_ref().is_some_and(|(table, cols)| {
                let policy = relation_policy(*table);
                reads_protected(&policy, cols)
                    || masked_inheritance_child(*table)
                    || family_refusal(*table).is_some()
            }) || crate::pg::catalog::index_runs_owner_code(indexid);
            let r = Rc::new(IndexReads { columns, labelled });
            INDEXES.with(|i| i.borrow_mut().insert(indexid, r.clone()));
            r
        }
    };
    // Under deny by default, an index over a refused column too: its
    // order and a partial index's row count are of raw values.
    reads.labelled
        || crate::guc::deny_unlabelled_text()
            && reads
                .columns
                .as_ref()
                .is_some_and(|(table, cols)| unlabelled_text_refusal(*table, cols).is_some())
}

/// What [`index_reads_protected`] keeps of an index: read once (an
/// `index_open`) per index until the caches are dropped.
struct IndexReads {
    /// The table and the columns the index reads (`None`: not an index).
    columns: Option<(Oid, Vec<i16>)>,
    /// One of them is labelled (or otherwise read only masked).
    labelled: bool,
}

/// Under `dptext.deny_unlabelled_text`, whether masked sessions may not
/// write relation `relid`: it has a text column they may not read (a
/// constraint error's detail prints the row, `ON CONFLICT` tells whether a
/// value exists, an inserted value's place in an index order compares it).
pub(crate) fn writes_denied(relid: Oid) -> bool {
    crate::guc::deny_unlabelled_text() && unlabelled_text_refusal(relid, &[0]).is_some()
}

/// Why a masked session may not write `relid`, when one of its indexes
/// runs an owner's code ([`crate::pg::catalog::index_runs_owner_code`]):
/// the owner built it over raw values, so a masked write's uniqueness
/// search compares the session's masked values along the raw order (found
/// or missed duplicates tell that order) and files entries out of place.
pub(crate) fn owner_index_write_refusal(relid: Oid) -> Option<String> {
    let indexes = lookup(|| -> Result<Vec<Oid>, pgrx::spi::Error> {
        Spi::connect(|client| {
            let rows = client.select(
                "SELECT indexrelid FROM pg_catalog.pg_index WHERE indrelid OPERATOR(pg_catalog.=) $1",
                None,
                &oid_arg(relid),
            )?;
            let mut out = Vec::new();
            for row in rows {
                if let Some(i) = row.get::<Oid>(1)? {
                    out.push(i);
                }
            }
            Ok(out)
        })
    })
    .unwrap_or_else(|e| refuse(format!("could not read the indexes of a written table: {e}")));
    indexes
        .into_iter()
        .find(|&i| crate::pg::catalog::index_runs_owner_code(i))
        .map(|i| {
            format!(
                "masked sessions cannot write {}: its index {} runs code that is not built in (an operator class, an expression or a predicate), which its owner ran over raw values",
                crate::pg::catalog::relation_name(relid),
                crate::pg::catalog::relation_name(i)
            )
        })
}

/// How the rows of `$1`'s inheritance and partition family are placed:
/// each partition key (kind, table, its columns (0: an expression), its
/// expressions, NULL, whether an operator class of its is not built in),
/// each CHECK constraint when the family has more than one table, and
/// each index a member is clustered on (its oid fifth).
const FAMILY_PLACEMENT_SQL: &str = concat!(
    crate::pg::catalog::family_cte!(),
    "
SELECT 'partition key', p.partrelid, p.partattrs::pg_catalog.int2[], p.partexprs::pg_catalog.text,
       NULL::pg_catalog.oid,
       EXISTS (SELECT 1 FROM pg_catalog.unnest(p.partclass::pg_catalog.oid[]) k(c)
                WHERE k.c OPERATOR(pg_catalog.>=) 16384::pg_catalog.oid) -- FirstNormalObjectId
  FROM fam JOIN pg_catalog.pg_partitioned_table p ON p.partrelid OPERATOR(pg_catalog.=) fam.rel
UNION ALL
SELECT 'CHECK constraint', c.conrelid, c.conkey, c.conbin::pg_catalog.text, NULL, false
  FROM fam JOIN pg_catalog.pg_constraint c ON c.conrelid OPERATOR(pg_catalog.=) fam.rel
 WHERE c.contype OPERATOR(pg_catalog.=) 'c'
   AND (SELECT pg_catalog.count(*) FROM fam) OPERATOR(pg_catalog.>) 1
UNION ALL
SELECT 'clustered index', x.indrelid, NULL, NULL, x.indexrelid, false
  FROM fam JOIN pg_catalog.pg_index x ON x.indrelid OPERATOR(pg_catalog.=) fam.rel AND x.indisclustered"
);

/// Labels that apply to the columns of a relation: its own, else the
/// nearest ancestor's (partitions, inheritance children; for a Citus
/// shard, its distributed table, `$2`), else a descendant's on the
/// same-named column (reading a parent reads its children), else the
/// label of any other relation joined to it by inheritance (with multiple
/// inheritance a child's row is read through each of its parents, so a
/// label a child inherits from one parent protects the others too: the
/// whole connected family shares its labels). Every name is schema-qualified and every operator spelled
/// `OPERATOR(pg_catalog.=)`, so a session's `search_path` cannot redirect
/// the lookup to objects of its own.
const RULES_SQL: &str = "
WITH RECURSIVE up(rel, depth) AS (
    SELECT $1::pg_catalog.oid, 0
    UNION ALL
    SELECT $2::pg_catalog.oid, 1 WHERE $2 OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
    UNION ALL
    SELECT i.inhparent, up.depth OPERATOR(pg_catalog.+) 1
      FROM pg_catalog.pg_inherits i JOIN up ON i.inhrelid OPERATOR(pg_catalog.=) up.rel
), down(rel, depth) AS (
    SELECT $1::pg_catalog.oid, 0
    UNION ALL
    SELECT i.inhrelid, down.depth OPERATOR(pg_catalog.+) 1
      FROM pg_catalog.pg_inherits i JOIN down ON i.inhparent OPERATOR(pg_catalog.=) down.rel
), edges(a, b) AS (
    SELECT i.inhrelid, i.inhparent FROM pg_catalog.pg_inherits i
    UNION ALL
    SELECT i.inhparent, i.inhrelid FROM pg_catalog.pg_inherits i
), comp(rel) AS (
    SELECT rel FROM up
    UNION
    SELECT e.b FROM edges e JOIN comp ON e.a OPERATOR(pg_catalog.=) comp.rel
), fam(rel, depth) AS (
    SELECT rel, depth FROM up
    UNION ALL
    SELECT rel, 100000 OPERATOR(pg_catalog.+) depth FROM down WHERE depth OPERATOR(pg_catalog.>) 0
    UNION ALL
    SELECT rel, 200000 FROM comp
)
SELECT a.attnum, l.label, fam.depth
  FROM pg_catalog.pg_attribute a
  JOIN pg_catalog.pg_attribute fa ON fa.attname OPERATOR(pg_catalog.=) a.attname AND NOT fa.attisdropped
  JOIN fam ON fa.attrelid OPERATOR(pg_catalog.=) fam.rel
  JOIN pg_catalog.pg_seclabel l ON l.objoid OPERATOR(pg_catalog.=) fam.rel
       AND l.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND l.objsubid OPERATOR(pg_catalog.=) fa.attnum
       AND l.provider OPERATOR(pg_catalog.=) 'dptext'
 WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
 ORDER BY a.attnum, fam.depth";

/// The source and number of the last build recorded for target `$1`: one
/// row always, NULLs when there is none, or when the names it recorded
/// are not those of the relations with these OIDs now (OIDs are reused,
/// and a dump restored elsewhere keeps the OIDs of the cluster it came
/// from; a copy or source renamed since is not trusted either).
const LAST_BUILD_SQL: &str = "
SELECT l.source_oid, l.build FROM (VALUES (1)) v LEFT JOIN LATERAL (
  SELECT p.source_oid, p.build, p.target_name, p.source_schema, p.source_table
    FROM dptext.provenance p
   WHERE p.target_oid OPERATOR(pg_catalog.=) $1
     AND p.event OPERATOR(pg_catalog.=) ANY ('{create,refresh}'::pg_catalog.text[])
   ORDER BY p.build DESC LIMIT 1) l
  ON EXISTS (
    SELECT 1
      FROM pg_catalog.pg_class t
      JOIN pg_catalog.pg_namespace tn ON tn.oid OPERATOR(pg_catalog.=) t.relnamespace
      JOIN pg_catalog.pg_class s ON s.oid OPERATOR(pg_catalog.=) l.source_oid
      JOIN pg_catalog.pg_namespace sn ON sn.oid OPERATOR(pg_catalog.=) s.relnamespace
     WHERE t.oid OPERATOR(pg_catalog.=) $1
       AND l.target_name OPERATOR(pg_catalog.=) ANY (ARRAY[
             pg_catalog.format('%I.%I', tn.nspname, t.relname),
             pg_catalog.quote_ident(t.relname::pg_catalog.text)])
       AND l.source_schema OPERATOR(pg_catalog.=) sn.nspname
       AND l.source_table OPERATOR(pg_catalog.=) s.relname)";

/// The columns of target `$1` that build `$3` did not sanitize, with the
/// number of the same-named column of its source `$2` (NULL: none).
const UNSANITIZED_SQL: &str = "
SELECT a.attnum, s.attnum
  FROM pg_catalog.pg_attribute a
  LEFT JOIN pg_catalog.pg_attribute s ON s.attrelid OPERATOR(pg_catalog.=) $2
       AND s.attname OPERATOR(pg_catalog.=) a.attname
       AND s.attnum OPERATOR(pg_catalog.>) 0 AND NOT s.attisdropped
 WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
   AND NOT EXISTS (SELECT 1 FROM dptext.provenance p
                    WHERE p.target_oid OPERATOR(pg_catalog.=) $1
                      AND p.build OPERATOR(pg_catalog.=) $3
                      AND p.column_name OPERATOR(pg_catalog.=) a.attname)
 ORDER BY a.attnum";

/// Whether Citus's distribution catalog exists in this database.
const HAS_DISTRIBUTION_SQL: &str =
    "SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL";

/// The distribution key of Citus table `$1` (a `Var` node), one row
/// always: NULL for a reference table or a relation Citus does not
/// distribute.
const DISTRIBUTION_KEY_SQL: &str = "
SELECT (SELECT p.partkey FROM pg_catalog.pg_dist_partition p
         WHERE p.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) $1 LIMIT 1)";

/// Whether Citus's shard catalog exists in this database.
const HAS_SHARDS_SQL: &str =
    "SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_shard') IS NOT NULL";

/// The distributed table of Citus shard `$1` (0, one row always, when
/// there is no such shard).
const SHARD_OF_SQL: &str = "
SELECT COALESCE((SELECT s.logicalrelid FROM pg_catalog.pg_dist_shard s
                  WHERE s.shardid OPERATOR(pg_catalog.=) $1), 0::pg_catalog.oid)";

/// On a Citus node, the distributed table whose shard `relid` is (0 for
/// any other relation). Citus copies labels to a shard only when the
/// shard is created after them; a label set later reaches the workers'
/// copies of the table itself, so a shard takes its table's rules as a
/// partition takes its parent's. A shard is named `table_<shardid>` (a
/// long table name is shortened before the suffix) in its table's
/// schema, and has its table's owner. The owner matters: a table that a
/// masked role created and filled itself, named like a shard, would
/// otherwise serve the role's own guesses through the table's rule, an
/// oracle for its masked values. Without Citus this is one catalog probe.
fn shard_parent(relid: Oid) -> Oid {
    let has_shards = read_one::<bool>(HAS_SHARDS_SQL, &[])
        .unwrap_or_else(|e| refuse(format!("could not look for Citus shards: {e}")))
        .unwrap_or(false);
    if !has_shards {
        return Oid::INVALID;
    }
    let Some((nsp, name)) = crate::pg::catalog::relation_namespace_and_name(relid) else {
        return Oid::INVALID;
    };
    let Some(shard_id) = name
        .rsplit_once('_')
        .and_then(|(_, digits)| digits.parse::<i64>().ok())
    else {
        return Oid::INVALID;
    };
    let parent = read_one::<Oid>(SHARD_OF_SQL, &[shard_id.into()])
        .unwrap_or_else(|e| refuse(format!("could not read Citus's shard catalog: {e}")))
        .unwrap_or(Oid::INVALID);
    let same_owner = crate::pg::catalog::relation_owner(relid).is_some()
        && crate::pg::catalog::relation_owner(relid) == crate::pg::catalog::relation_owner(parent);
    match crate::pg::catalog::relation_namespace_and_name(parent) {
        Some((parent_nsp, _)) if parent_nsp == nsp && parent != relid && same_owner => parent,
        _ => Oid::INVALID,
    }
}

fn read_policy(relid: Oid) -> RelationPolicy {
    let parent = shard_parent(relid);
    let args = || -> Vec<pgrx::datum::DatumWithOid<'static>> { vec![relid.into(), parent.into()] };
    let mut rules: Vec<ColumnRule> = Vec::new();
    let rows: Result<Vec<(i16, String, i32)>, pgrx::spi::Error> = Spi::connect(|client| {
        let table = client.select(RULES_SQL, None, &args())?;
        let mut out = Vec::new();
        for row in table {
            let attnum: Option<i16> = row.get(1)?;
            let label: Option<String> = row.get(2)?;
            let depth: Option<i32> = row.get(3)?;
            if let (Some(a), Some(l)) = (attnum, label) {
                out.push((a, l, depth.unwrap_or(i32::MAX)));
            }
        }
        Ok(out)
    });
    let rows = rows.unwrap_or_else(|e| refuse(format!("could not read the masking rules: {e}")));
    let mut allowed: Vec<i16> = Vec::new();
    // The rule chosen for each column (the nearest label's), as spelled.
    let mut chosen: Vec<(i16, SpelledRule)> = Vec::new();
    for (attnum, label, depth) in rows {
        if dptext_core::rules::is_allow_label(&label) {
            // Not a rule; a MASKED WITH label elsewhere in the family wins.
            // Only the relation's own or an ancestor's: an ALLOW on one
            // partition or child says nothing of its siblings' rows.
            if depth < 100_000 {
                allowed.push(attnum);
            }
            continue;
        }
        let rule = dptext_core::rules::parse_column_label(&label)
            .unwrap_or_else(|e| refuse(format!("a dptext label could not be read ({e}): {label}")));
        let spelled = (
            rule.mechanism().to_string(),
            rule.params().to_string(),
            rule.group_column.clone(),
        );
        if let Some((_, first)) = chosen.iter().find(|(a, _)| *a == attnum) {
            // The nearest label wins, but a partition or child read
            // through this relation must not be masked by a weaker rule
            // than its own: a family whose labels disagree below the
            // relation read fails closed.
            if (100_000..200_000).contains(&depth) && *first != spelled {
                let why = format!(
                    "column {attnum} of {} has a dptext rule other than that of one of its partitions or inheritance children: reading them through it would mask their rows by another rule than their own; label the family alike, or read the partitions directly (or the relation alone, with ONLY)",
                    crate::pg::catalog::relation_name(relid)
                );
                DISAGREEING.with(|d| {
                    d.borrow_mut().entry(relid).or_insert(why);
                });
            }
            continue;
        }
        chosen.push((attnum, spelled));
        // Checked again here, not only when the label was set: a column's
        // type can be changed afterwards, and the rewrite hands the value
        // to the rule as text.
        let (typ, _, _) = crate::pg::catalog::attribute_type(relid, attnum);
        if ![pg_sys::TEXTOID, pg_sys::VARCHAROID, pg_sys::BPCHAROID].contains(&typ) {
            refuse(format!(
                "column {attnum} of {} has a dptext rule but is no longer text, varchar or char (its type was changed since the label was set): relabel it",
                crate::pg::catalog::relation_name(relid)
            ));
        }
        // The grouping column is found by name in the relation read (a
        // partition or shard carries the same names, not always the same
        // numbers); one it lacks fails closed.
        let group = rule.group_column.as_ref().map(|name| {
            let g = crate::pg::catalog::attnum(relid, name).unwrap_or_else(|| {
                refuse(format!(
                    "a dptext rule of {} groups by column {name}, which it does not have",
                    crate::pg::catalog::relation_name(relid)
                ))
            });
            // Checked again here, not only when the label was set: columns
            // can be renamed, and their types changed, afterwards.
            if g == attnum {
                refuse(format!(
                    "a dptext rule of {} groups by column {name}, which is the labelled column itself (renamed since the label was set): the raw value would fix its own date shift",
                    crate::pg::catalog::relation_name(relid)
                ));
            }
            let (typ, _, _) = crate::pg::catalog::attribute_type(relid, g);
            if !crate::rules::group_type_supported(typ) {
                refuse(format!(
                    "a dptext rule of {} groups by column {name}, whose type's text depends on session settings (DateStyle, TimeZone, extra_float_digits...): a masked session could draw many date shifts of one value; group by a text, integer, numeric or uuid column",
                    crate::pg::catalog::relation_name(relid)
                ));
            }
            g
        });
        rules.push(ColumnRule {
            attnum,
            mechanism: rule.mechanism().to_string(),
            params: rule.params().to_string(),
            group,
        });
    }
    allowed.retain(|a| !rules.iter().any(|r| r.attnum == *a));
    ALLOWED.with(|m| m.borrow_mut().insert(relid, Rc::new(allowed)));
    let relkind = crate::pg::catalog::relkind(relid);
    if relkind == pg_sys::RELKIND_VIEW && !rules.is_empty() {
        // Labels on a view's columns are refused when set; one set before
        // that was refused would never be enforced (the view is replaced
        // by its query before the rewrite sees it), so its reads are
        // refused rather than served raw.
        refuse(format!(
            "view {} has dptext labels on its columns, which cannot be enforced on a view: remove them and label the columns of the tables it reads",
            crate::pg::catalog::relation_name(relid)
        ));
    }
    if let Some(build) = last_build(relid) {
        return sanitized_policy(relid, rules, build);
    }
    if relkind != pg_sys::RELKIND_MATVIEW {
        return if rules.is_empty() {
            RelationPolicy::Plain
        } else {
            RelationPolicy::Masked(rules)
        };
    }
    matview_policy(relid, rules)
}

/// The last build `dptext.create_sanitized_view` (or a refresh) recorded
/// for relation `relid`: its source and build number; `None` when it did
/// not build it (or the extension's catalog is missing).
fn last_build(relid: Oid) -> Option<(Oid, i64)> {
    let has_provenance = read_one::<bool>(
        "SELECT pg_catalog.to_regclass('dptext.provenance') IS NOT NULL",
        &[],
    )
    .unwrap_or_else(|e| refuse(format!("could not look for dptext.provenance: {e}")))
    .unwrap_or(false);
    if !has_provenance {
        return None;
    }
    let (source, build) = read_two::<Oid, i64>(LAST_BUILD_SQL, &oid_arg(relid))
        .unwrap_or_else(|e| refuse(format!("could not read dptext.provenance: {e}")));
    source.zip(build)
}

/// A copy `dptext.create_sanitized_view` built: the columns its last build
/// sanitized are served as they are. Every other column is a plain copy of
/// the source's same-named column; one whose source column has been
/// labelled since the build holds raw values, so it is read through the
/// source's rule now, as the source is (or refused when that rule fixes
/// deidentify's date shift per group, which stored rows cannot be served
/// by). A column that matches no source column, renamed on either side
/// since the build, is refused.
fn sanitized_policy(relid: Oid, mut rules: Vec<ColumnRule>, build: (Oid, i64)) -> RelationPolicy {
    let (source, number) = build;
    // The build sanitized each value, but which rows the copy holds and in
    // what order it stored them are the source's: a copy of a source that
    // masked sessions may not read whole (a filtered or sorted view, a
    // partition family placed by a labelled column, a clustered table, a
    // routed inheritance parent, rows chosen by row-level security) hands
    // them on, and joined to the masked source its sanitized values tell
    // which rows matched. Checked at every read: the owner may cluster the
    // source or enable row-level security after the build.
    if let Some(why) = copy_source_refusal(source) {
        return RelationPolicy::Refused(format!(
            "masked sessions cannot read {}: it is a sanitized copy of {}, and {why}, so which rows the copy holds and their order follow raw values; copy the table itself with dptext.create_sanitized_view and filter or sort the copy",
            crate::pg::catalog::relation_name(relid),
            crate::pg::catalog::relation_name(source)
        ));
    }
    let mut taint: Option<String> = None;
    // Its columns match the source's by name, those the build sanitized
    // left out (a materialized view's query cannot be followed through the
    // rules' calls); one that matches no source column (renamed since)
    // cannot be followed, and is refused.
    let args: Vec<pgrx::datum::DatumWithOid<'static>> =
        vec![relid.into(), source.into(), number.into()];
    let rows: Result<Vec<(i16, Option<i16>)>, pgrx::spi::Error> = Spi::connect(|client| {
        let mut out = Vec::new();
        for row in client.select(UNSANITIZED_SQL, None, &args)? {
            if let Some(a) = row.get::<i16>(1)? {
                out.push((a, row.get::<i16>(2)?));
            }
        }
        Ok(out)
    });
    let copies: Vec<(i16, Option<(Oid, i16)>)> = rows
        .unwrap_or_else(|e| refuse(format!("could not read dptext.provenance: {e}")))
        .into_iter()
        .map(|(a, s)| (a, s.map(|s| (source, s))))
        .collect();
    for (attnum, copy) in copies {
        if rules.iter().any(|r| r.attnum == attnum) {
            continue;
        }
        match copy {
            Some((src, src_att)) => {
                if let Some(why) = serve_copy(&mut rules, attnum, src, src_att) {
                    taint.get_or_insert(why);
                }
            }
            None => {
                taint.get_or_insert_with(|| {
                    format!("its column {attnum} matches no column of its source (renamed since the build?)")
                });
            }
        }
    }
    conclude(rules, taint, |why| {
        format!(
            "masked sessions may read only the masked columns of {}: {why}; rebuild it with dptext.create_sanitized_view",
            crate::pg::catalog::relation_name(relid)
        )
    })
}

/// Why a sanitized copy of `source` may not be served: the source's own
/// rows, or their order, follow raw values (see [`sanitized_policy`]).
fn copy_source_refusal(source: Oid) -> Option<String> {
    let policy = relation_policy(source);
    match policy.as_ref() {
        RelationPolicy::Refused(why) | RelationPolicy::Derived { why, .. } => {
            return Some(format!("masked sessions may not read it ({why})"));
        }
        _ => {}
    }
    source_flaw(source).map(|flaw| match flaw {
        SourceFlaw::RowSecurity => {
            "it has row-level security (the policies of whoever built the copy chose its rows)"
                .into()
        }
        SourceFlaw::Placed(why) => format!("masked sessions may not read it ({why})"),
        SourceFlaw::InheritanceParent => {
            "it is a parent of plain inheritance with dptext rules (the copy stored its rows child after child)"
                .into()
        }
    })
}

/// Why the rows a build read from `src` (a materialized view's refresh, a
/// sanitized copy's build), or the order it read them in, may follow raw
/// values: a copy stores its rows in the order it read them.
enum SourceFlaw {
    /// Row-level security filtered the rows, by the policies of whoever
    /// built it (a policy on a labelled column, of this table or, through
    /// a subquery, of another, is a filter on raw values).
    RowSecurity,
    /// The source's own rows were placed by raw values or by an owner's
    /// code ([`family_refusal`], its reason).
    Placed(String),
    /// A parent of plain inheritance with rules: its rows were read child
    /// after child (the order a masked read of the parent shuffles), and
    /// the owner's routing chose each row's child.
    InheritanceParent,
}

/// What [`SourceFlaw`] applies to source `src`, if any.
fn source_flaw(src: Oid) -> Option<SourceFlaw> {
    if crate::pg::catalog::row_security(src) {
        return Some(SourceFlaw::RowSecurity);
    }
    if let Some(why) = family_refusal(src) {
        return Some(SourceFlaw::Placed(why));
    }
    (relation_policy(src).protects()
        && crate::pg::catalog::relkind(src) != pg_sys::RELKIND_PARTITIONED_TABLE
        && crate::pg::catalog::has_inheritance_children(src))
    .then_some(SourceFlaw::InheritanceParent)
}

/// A materialized view stores what its query computed when it was last
/// refreshed, from raw values. Its columns are served as the columns they
/// were computed from: a column with a label of its own by that rule, a
/// plain copy of a labelled column by the source's rule, a column computed
/// only from unlabelled columns as it is. When the query reads a labelled
/// column anywhere else (a filter, an expression) or cannot be followed
/// (see [`crate::enforce::lineage`]), every column without a rule is refused:
/// it may hold what the raw values decided. (A view built by
/// `dptext.create_sanitized_view` applied the rules itself and never comes
/// here: [`sanitized_policy`].)
fn matview_policy(relid: Oid, mut rules: Vec<ColumnRule>) -> RelationPolicy {
    let lineage = crate::enforce::lineage::matview_lineage(relid);
    let mut taint = lineage
        .opaque
        .map(|why| format!("its query cannot be followed ({why})"));
    let column =
        |rel: Oid, att: i16| format!("column {att} of {}", crate::pg::catalog::relation_name(rel));
    for &(src, att) in &lineage.arranged_by {
        if reads_protected(&relation_policy(src), &[att]) {
            // Which rows are stored, and in what order, follow raw values:
            // any column read in stored order tells them (sorted names
            // give their ranks; a DISTINCT stores them in hash order), so
            // no column is served, masked or not; count(*) still is.
            return RelationPolicy::Refused(format!(
                "masked sessions cannot read materialized view {}: its rows were sorted, grouped or deduplicated by the labelled {}, so the order they are stored in tells raw values; build it without that clause, or over a sanitized copy of the table (dptext.create_sanitized_view)",
                crate::pg::catalog::relation_name(relid),
                column(src, att)
            ));
        }
    }
    for &(src, att) in &lineage.reads {
        if reads_protected(&relation_policy(src), &[att]) {
            taint.get_or_insert_with(|| {
                format!("its query reads the labelled {}", column(src, att))
            });
        }
    }
    // A rule that fixes the date shift per group (GROUPED BY, or a literal
    // `group`) cannot be served from stored rows: a masked session that
    // refreshed the view stored values already shifted, and shifting them
    // again by the same days shows the shift (the difference with the
    // table's masked read), hence the raw dates; rows an unmasked session
    // stored would need the very grouping value of each row, or their
    // dates would move by a second draw, and enough draws of one date
    // bound it. Such columns are refused, and with them the view's other
    // unlabelled columns (a sanitized view is served as it is).
    let own_fixed = rules.iter().find(|r| rule_fixes_shift(r)).map(|r| r.attnum);
    if let Some(att) = own_fixed {
        rules.retain(|r| !rule_fixes_shift(r));
        taint.get_or_insert_with(|| {
            format!("its column {att} has a rule that fixes deidentify's date shift per group, which stored rows cannot be served by")
        });
    }
    for (i, copy) in lineage.copies.iter().enumerate() {
        let attnum = i16::try_from(i + 1).unwrap_or(i16::MAX);
        let Some((src, att)) = *copy else { continue };
        if rules.iter().any(|r| r.attnum == attnum) || own_fixed == Some(attnum) {
            continue;
        }
        if let Some(why) = serve_copy(&mut rules, attnum, src, att) {
            taint.get_or_insert(why);
        }
    }
    // A source whose rows, or their order, followed raw values passes
    // that on: the view stores the rows in the order it read them.
    let sources = lineage.reads.iter().chain(lineage.copies.iter().flatten());
    for &(src, _) in sources {
        let name = || crate::pg::catalog::relation_name(src);
        let Some(flaw) = source_flaw(src) else {
            continue;
        };
        taint.get_or_insert_with(|| match flaw {
            SourceFlaw::RowSecurity => format!(
                "it reads {}, which has row-level security: the policies of whoever refreshed it chose the rows it stores",
                name()
            ),
            SourceFlaw::Placed(why) => {
                format!("it reads a relation masked sessions cannot read ({why})")
            }
            SourceFlaw::InheritanceParent => format!(
                "it reads {}, a parent of plain inheritance with dptext rules, and stored its rows child after child, which tells the child the owner's routing chose for each",
                name()
            ),
        });
    }
    match taint {
        // Which rows the view stores, in what order, or what they hold
        // followed raw values: every column would tell them, the masked
        // ones by their stored order, and count(*) by how many matched.
        Some(why) => RelationPolicy::Refused(format!(
            "masked sessions cannot read materialized view {}: {why}, so which rows it stores, their order or their values may follow raw values; build it over a sanitized copy of the table (dptext.create_sanitized_view) instead",
            crate::pg::catalog::relation_name(relid)
        )),
        None => conclude(rules, None, |why| why),
    }
}

/// Serves column `attnum` of a stored copy, a plain copy of column `att`
/// of `src`, as the source is read: through its rule, pushed on `rules`.
/// Returns why the copy's unlabelled columns must be refused instead,
/// when the source column may not be served from stored rows (its rule
/// fixes deidentify's date shift per group) or may not be read at all.
fn serve_copy(rules: &mut Vec<ColumnRule>, attnum: i16, src: Oid, att: i16) -> Option<String> {
    let column = || format!("column {att} of {}", crate::pg::catalog::relation_name(src));
    let p = relation_policy(src);
    if let Some(r) = p.rule(att) {
        if rule_fixes_shift(r) {
            return Some(format!(
                "it copies {}, whose rule fixes deidentify's date shift per group, which stored rows cannot be served by",
                column()
            ));
        }
        rules.push(ColumnRule {
            attnum,
            mechanism: r.mechanism.clone(),
            params: r.params.clone(),
            group: None,
        });
        None
    } else {
        p.refuses_column(att)
            .map(|_| format!("it copies {}, which masked sessions may not read", column()))
    }
}

/// The policy of a stored copy: `rules`, and when `taint` says why, every
/// other column refused with the text `message` makes of it.
fn conclude(
    rules: Vec<ColumnRule>,
    taint: Option<String>,
    message: impl FnOnce(String) -> String,
) -> RelationPolicy {
    match taint {
        None if rules.is_empty() => RelationPolicy::Plain,
        None => RelationPolicy::Masked(rules),
        Some(why) => RelationPolicy::Derived {
            rules,
            why: message(why),
        },
    }
}

/// True when a rule fixes `deidentify`'s date shift per group: `GROUPED BY`,
/// or a literal `group` parameter in any stage.
fn rule_fixes_shift(r: &ColumnRule) -> bool {
    fn has_group(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Object(m) => m.contains_key("group") || m.values().any(has_group),
            serde_json::Value::Array(a) => a.iter().any(has_group),
            _ => false,
        }
    }
    // Unreadable parameters count as fixing it: refused, not served.
    r.group.is_some()
        || serde_json::from_str::<serde_json::Value>(&r.params).map_or(true, |v| has_group(&v))
}

/// The one SPI argument every lookup takes: the relation's oid.
fn oid_arg(relid: Oid) -> Vec<pgrx::datum::DatumWithOid<'static>> {
    vec![relid.into()]
}

/// The oid of `dptext.mask`; refuses the statement when the extension is
/// not installed in this database (labels without the extension cannot be
/// enforced).
pub(crate) fn mask_function() -> Oid {
    // Masked reads in a database whose text is not UTF-8 are refused when
    // the query is planned, whatever its rows hold: a value converted row
    // by row would fail only on rows with non-ASCII bytes, a bit of each
    // raw value.
    crate::pg::interrupts::require_utf8();
    function_oid("dptext.mask(pg_catalog.text,pg_catalog.text,pg_catalog.text)")
}

/// The oid of `dptext.mask(text, text, text, text)`, for rules with a
/// grouping column.
pub(crate) fn mask_function_grouped() -> Oid {
    function_oid("dptext.mask(pg_catalog.text,pg_catalog.text,pg_catalog.text,pg_catalog.text)")
}

/// The oid of the dptext function `signature` (schema-qualified, with
/// argument types); refuses the statement when it does not exist.
pub(crate) fn function_oid(signature: &'static str) -> Oid {
    try_function_oid(signature).unwrap_or_else(|| {
        refuse(format!("{signature} is missing, so masked reads cannot be enforced: this database has dptext labels but not the dptext extension (CREATE EXTENSION dptext), or an older version of it (ALTER EXTENSION dptext UPDATE)"))
    })
}

/// The oid of the dptext function `signature`, when it exists.
pub(crate) fn try_function_oid(signature: &'static str) -> Option<Oid> {
    if let Some(oid) = FUNCTIONS.with(|f| f.borrow().get(signature).copied()) {
        return Some(oid);
    }
    let oid = lookup(|| {
        read_one::<Oid>(
            "SELECT pg_catalog.to_regprocedure($1)::pg_catalog.oid",
            &[signature.into()],
        )
    })
    .ok()
    .flatten()
    .filter(|o| *o != Oid::INVALID)?;
    FUNCTIONS.with(|f| f.borrow_mut().insert(signature, oid));
    Some(oid)
}

/// True when any column of this database carries a dptext label.
pub(crate) fn database_has_column_labels() -> bool {
    lookup(|| {
        read_one::<bool>(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_seclabel l
                             WHERE l.provider OPERATOR(pg_catalog.=) 'dptext'
                               AND l.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass)",
            &[],
        )
    })
    .unwrap_or_else(|e| refuse(format!("could not read the dptext labels: {e}")))
    .unwrap_or(true)
}

/// Settings whose administrator's value (a role's default, say
/// `max_parallel_workers_per_gather = 0`) narrows what a masked read's
/// plan shows: a parallel scan hands out pages to workers, so the order of
/// its rows shows where pages end, which follows the raw lengths.
const BOUNDED_SETTINGS: [&str; 2] = ["max_parallel_workers_per_gather", "max_parallel_workers"];

/// Refuses a masked read planned under a [`BOUNDED_SETTINGS`] value the
/// session raised above the one it started with (the administrator's).
pub(crate) fn refuse_raised_settings() {
    for name in BOUNDED_SETTINGS {
        if crate::pg::settings::raised_by_session(name) {
            refuse(format!(
                "masked sessions read labelled columns under the {name} an administrator gave them, and this session raised it: RESET {name}"
            ));
        }
    }
}

/// Whether `relid` is a child of plain inheritance in a family with dptext
/// rules: its own statistics, extended statistics and indexes describe the
/// rows the owner's routing sent it, which masked plans must not use.
pub(crate) fn masked_inheritance_child(relid: Oid) -> bool {
    matches!(relation_policy(relid).as_ref(), RelationPolicy::Masked(_))
        && plain_inheritance_child(relid)
}

/// Whether `relid` is a child of plain inheritance (a parent in
/// `pg_inherits`, not a partition), cached until the next invalidation.
pub(crate) fn plain_inheritance_child(relid: Oid) -> bool {
    if let Some(c) = CHILDREN.with(|c| c.borrow().get(&relid).copied()) {
        return c;
    }
    let child = lookup(|| {
        read_one::<bool>(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhrelid OPERATOR(pg_catalog.=) $1)
                AND NOT (SELECT c.relispartition FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1)",
            &[relid.into()],
        )
    })
    // Fail closed: a child whose kind could not be read gets no statistics.
    .map_or(true, |c| c.unwrap_or(true));
    CHILDREN.with(|c| c.borrow_mut().insert(relid, child));
    child
}
