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
use crate::pg::lookup::{lookup, read_one};

mod copies;
mod families;
mod functions;
mod indexes;

use copies::{last_build, matview_policy, sanitized_policy};
use families::shard_parent;
pub(crate) use families::{family_refusal, masked_inheritance_child, plain_inheritance_child};
pub(crate) use functions::{function_oid, mask_function, mask_function_grouped, try_function_oid};
use indexes::IndexReads;
pub(crate) use indexes::{index_reads_protected, owner_index_write_refusal, writes_denied};

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
