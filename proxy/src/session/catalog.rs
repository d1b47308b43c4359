//! Proxy mode's view of the database, read over the session's own
//! upstream connection before its first statement: relations with their
//! columns, functions, operators and types (for the statement analyzer),
//! the session's `search_path` and user, and where the protected columns
//! are (their tables' OIDs and column numbers, so that a result column
//! that comes from one is recognised by its RowDescription too), and
//! the partition keys and CHECK constraints that split a hierarchy of
//! partitions or inheritance children by a protected column (its members
//! are then refused: `super::hierarchy`), and the row-level security
//! policies that filter a relation's rows by one (it is then refused:
//! `super::row_security`), the indexes that order or choose rows by one
//! (`super::indexes`), the owners of relations (a relation whose
//! owner the proxy does not trust is refused: `super::owners`), and the
//! types whose whole closure the session trusts (`super::types`).
//!
//! The reads run inside one transaction whose `search_path` is pinned to
//! `pg_catalog`, after the session's own path is read (`super::pinned`),
//! and name every operator, function and type with `pg_catalog`
//! (`super::queries`): no other role's operator or function runs in them.
//!
//! The policy is the configuration's `[[rule]]`s and `[[sanitized]]`
//! relations, plus the rules of the dptext extension's column labels when
//! the upstream has it. A protected column whose type is not `text`,
//! `varchar` or `char` refuses the session: its values cannot be sanitized
//! as text.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::analysis::{
    FunctionKind, MemoryCatalog, Policy, QualName, RelationInfo, RelationKind, UntrustedOwner,
    Volatility,
};
use crate::error::{ProxyError, Result};
use crate::mode::{self, ColumnRule};
use crate::upstream::Upstream;

use super::generated::{self, Generated};
use super::hierarchy::{Check, Columns, Hierarchy};
use super::indexes::{self, Index};
use super::owners::{self, Owner};
use super::pinned;
use super::queries::*;
use super::row_security::{self, PolicyQual};
use super::types::{self, Edge};

/// What a proxy-mode session analyzes its statements against.
#[derive(Debug)]
pub struct SessionCatalog {
    /// Relations, functions, operators and types.
    pub catalog: MemoryCatalog,
    /// Protected columns and the allow- and deny-lists.
    pub policy: Policy,
    /// The session's `search_path`, entries unquoted.
    pub search_path: Vec<String>,
    /// The session's user (for `$user`).
    pub user: String,
    /// (table OID, column number) of every protected column, with its
    /// rule (the canonical label text the sanitizer knows it by).
    pub origins: HashMap<(u32, i16), String>,
    /// Every rule in force, by its canonical label text.
    pub rules: HashMap<String, dptext_core::mechanisms::MechanismSpec>,
    /// OIDs of the types the session trusts, whose whole closure (what
    /// they are built on, the functions they may run) only a superuser
    /// may change (`super::types`): a `Parse` may name only these as its
    /// parameters' types, and columns of any other are opaque.
    pub trusted_types: HashSet<u32>,
    /// Relations refused for an owner the proxy does not trust, with the
    /// member of their hierarchy that owner owns (for `dptext-proxy
    /// check`).
    pub untrusted: BTreeMap<QualName, UntrustedOwner>,
    /// Relations refused for an index that reads a protected column, with
    /// that index (for `dptext-proxy check`).
    pub indexed: BTreeMap<QualName, QualName>,
}

/// Text types whose values (text and binary format alike) are UTF-8 text.
const TEXT_TYPES: [u32; 3] = [25, 1043, 1042];

/// Settings the analyzer's default list allows that proxy mode does not:
/// the client encoding (sanitizing reads UTF-8).
const PROXY_MODE_FIXED_SETTINGS: [&str; 1] = ["client_encoding"];

type Rows = Vec<Vec<Option<String>>>;

async fn rows(up: &mut Upstream, what: &str, sql: &str) -> Result<Rows> {
    up.query(sql)
        .await?
        .map_err(|e| ProxyError::Upstream(format!("reading {what} for proxy mode: {e}")))
}

fn cell(row: &[Option<String>], i: usize) -> Result<&str> {
    row.get(i)
        .and_then(|c| c.as_deref())
        .ok_or_else(|| ProxyError::Upstream("a catalog query returned NULL".into()))
}

fn num<T: std::str::FromStr>(row: &[Option<String>], i: usize) -> Result<T> {
    let s = cell(row, i)?;
    s.parse()
        .map_err(|_| ProxyError::Upstream(format!("a catalog query returned \"{s}\"")))
}

fn volatility(c: &str) -> Volatility {
    match c {
        "i" => Volatility::Immutable,
        "s" => Volatility::Stable,
        _ => Volatility::Volatile,
    }
}

/// The columns of every partition key, by table; `None` where an
/// expression's columns could not be found (taken as every column).
async fn partition_keys(up: &mut Upstream) -> Result<BTreeMap<u32, Columns>> {
    let mut named: BTreeMap<u32, (BTreeSet<i16>, bool)> = BTreeMap::new();
    let mut read: HashMap<u32, BTreeSet<i16>> = HashMap::new();
    for r in rows(up, "partition keys", PARTITION_KEYS_SQL).await? {
        let (oid, attnum) = (num::<u32>(&r, 0)?, num::<i16>(&r, 1)?);
        if cell(&r, 2)? == "e" {
            let (cols, expression) = named.entry(oid).or_default();
            if attnum == 0 {
                *expression = true;
            } else {
                cols.insert(attnum);
            }
        } else {
            read.entry(oid).or_default().insert(attnum);
        }
    }
    Ok(named
        .into_iter()
        .map(|(oid, (mut cols, expression))| {
            if !expression {
                return (oid, Some(cols));
            }
            // Every expression reads a column (PostgreSQL refuses constant
            // keys): none found means the catalog was not read right.
            match read.remove(&oid) {
                Some(found) if !found.is_empty() => {
                    cols.extend(found);
                    (oid, Some(cols))
                }
                _ => (oid, None),
            }
        })
        .collect())
}

/// The policies that filter the session's reads.
async fn policies(up: &mut Upstream) -> Result<Vec<PolicyQual>> {
    rows(up, "row-level security policies", POLICIES_SQL)
        .await?
        .iter()
        .map(|r| {
            Ok(PolicyQual {
                relation: num(r, 0)?,
                name: cell(r, 1)?.to_owned(),
                qual: r.get(2).and_then(|c| c.clone()),
            })
        })
        .collect()
}

/// The numbers of a list PostgreSQL prints: an array (`{1,3}`) or an
/// `int2vector` (`1 3`).
fn numbers(list: &str) -> Result<Vec<i16>> {
    list.trim_matches(|c| c == '{' || c == '}')
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|n| !n.is_empty())
        .map(|n| {
            n.parse::<i16>()
                .map_err(|_| ProxyError::Upstream(format!("a catalog query returned \"{list}\"")))
        })
        .collect()
}

/// The indexes of relations.
async fn indexes(up: &mut Upstream) -> Result<Vec<Index>> {
    rows(up, "indexes", INDEXES_SQL)
        .await?
        .iter()
        .map(|r| {
            let keys = usize::try_from(num::<i16>(r, 4)?).unwrap_or(0);
            Ok(Index {
                relation: num(r, 0)?,
                name: QualName::new(cell(r, 1)?, cell(r, 2)?),
                key: numbers(cell(r, 3)?)?.into_iter().take(keys).collect(),
                expressions: r.get(5).and_then(|c| c.clone()),
                predicate: r.get(6).and_then(|c| c.clone()),
                depends: numbers(cell(r, 7)?)?.into_iter().collect(),
                total: cell(r, 8)? == "true",
            })
        })
        .collect()
}

/// The generated columns of tables.
async fn generated_columns(up: &mut Upstream) -> Result<Vec<Generated>> {
    rows(up, "generated columns", GENERATED_SQL)
        .await?
        .iter()
        .map(|r| {
            Ok(Generated {
                relation: num(r, 0)?,
                column: cell(r, 1)?.to_owned(),
                expression: cell(r, 2)?.to_owned(),
                depends: numbers(cell(r, 3)?)?.into_iter().collect(),
            })
        })
        .collect()
}

/// The CHECK constraints of tables.
async fn checks(up: &mut Upstream) -> Result<Vec<Check>> {
    rows(up, "check constraints", CHECKS_SQL)
        .await?
        .iter()
        .map(|r| {
            let columns = match r.get(1).and_then(|c| c.as_deref()) {
                None => None,
                Some(list) => Some(numbers(list)?.into_iter().collect()),
            };
            Ok(Check {
                relation: num(r, 0)?,
                columns,
                inherited: cell(r, 2)? == "t",
                no_inherit: cell(r, 3)? == "t",
            })
        })
        .collect()
}

/// The types the session trusts (`super::types`), and the names of the
/// others, by OID; adds every type to `catalog`.
async fn types(
    up: &mut Upstream,
    catalog: &mut MemoryCatalog,
) -> Result<(HashSet<u32>, HashMap<u32, String>)> {
    let mut candidates: HashSet<u32> = HashSet::new();
    let mut names: HashMap<u32, String> = HashMap::new();
    for r in rows(up, "types", TYPES_SQL).await? {
        let (schema, name, oid) = (cell(&r, 0)?, cell(&r, 1)?, num::<u32>(&r, 2)?);
        catalog.add_type(schema, name);
        if cell(&r, 3)? == "t" {
            candidates.insert(oid);
        }
        names.insert(oid, format!("{schema}.{name}"));
    }
    let edges = rows(up, "what types are made of", TYPE_EDGES_SQL)
        .await?
        .iter()
        .map(|r| {
            let edge = Edge::of(cell(r, 1)?, num(r, 2)?, cell(r, 3)? == "t");
            Ok((num(r, 0)?, edge.unwrap_or(Edge::Unfollowed)))
        })
        .collect::<Result<Vec<(u32, Edge)>>>()?;
    let trusted = types::trusted(&candidates, &edges);
    names.retain(|oid, _| !trusted.contains(oid));
    Ok((trusted, names))
}

/// What the configuration declares: rules, sanitized relations, trusted
/// owners.
#[derive(Debug, Clone, Copy)]
pub struct Declared<'a> {
    /// The `[[rule]]`s, checked.
    pub rules: &'a [ColumnRule],
    /// The `[[sanitized]]` relations.
    pub sanitized: &'a [mode::Sanitized],
    /// `masking.trusted_owners`.
    pub trusted_owners: &'a [String],
}

/// Reads everything a proxy-mode session needs, over its own connection
/// (before any client message is relayed), which must be idle outside a
/// transaction block: the session's search path, then the rest in a
/// transaction whose path is pinned to `pg_catalog`.
pub async fn load(up: &mut Upstream, declared: Declared<'_>) -> Result<SessionCatalog> {
    let search_path = rows(up, "the search path", SCHEMAS_SQL)
        .await?
        .iter()
        .map(|r| cell(r, 0).map(str::to_owned))
        .collect::<Result<Vec<String>>>()?;
    pinned::begin(up).await?;
    let read = read(up, declared, search_path).await;
    let ended = pinned::end(up, read.is_ok()).await;
    let catalog = read?;
    ended?;
    Ok(catalog)
}

/// The reads of [`load`] after the search path's, in the pinned
/// transaction.
async fn read(
    up: &mut Upstream,
    declared: Declared<'_>,
    search_path: Vec<String>,
) -> Result<SessionCatalog> {
    let session = rows(up, "the session", SESSION_SQL).await?;
    let first = session
        .first()
        .ok_or_else(|| ProxyError::Upstream("no session row".into()))?;
    let user = cell(first, 0)?.to_owned();
    let spill_limit = Some(cell(first, 1)?.to_owned()).filter(|l| l != "-1");

    let mut catalog = MemoryCatalog::new();
    // Types first: columns and row types of types the session does not
    // trust are opaque (RelationInfo::opaque).
    let (trusted_types, untrusted_types) = types(up, &mut catalog).await?;
    let mut names: HashMap<u32, (String, String, RelationKind)> = HashMap::new();
    let mut row_types: HashMap<u32, u32> = HashMap::new();
    let mut relation_owners: HashMap<u32, Owner> = HashMap::new();
    let mut partitioned: BTreeSet<u32> = BTreeSet::new();
    for r in rows(up, "relations", RELATIONS_SQL).await? {
        if cell(&r, 3)? == "p" {
            partitioned.insert(num(&r, 0)?);
        }
        let kind = match cell(&r, 3)? {
            "r" | "p" => RelationKind::Table,
            "v" => RelationKind::View,
            "m" => RelationKind::MaterializedView,
            _ => RelationKind::Other,
        };
        let oid = num(&r, 0)?;
        names.insert(
            oid,
            (cell(&r, 1)?.to_owned(), cell(&r, 2)?.to_owned(), kind),
        );
        row_types.insert(oid, num(&r, 4)?);
        relation_owners.insert(
            oid,
            Owner {
                name: cell(&r, 5)?.to_owned(),
                superuser: cell(&r, 6)? == "t",
            },
        );
    }
    let mut columns: HashMap<u32, Vec<(i16, String, u32)>> = HashMap::new();
    for r in rows(up, "columns", COLUMNS_SQL).await? {
        columns.entry(num(&r, 0)?).or_default().push((
            num(&r, 1)?,
            cell(&r, 2)?.to_owned(),
            num(&r, 3)?,
        ));
    }
    let mut hierarchy = Hierarchy::new();
    for (oid, (schema, name, _)) in &names {
        let cols = columns.get(oid).into_iter().flatten();
        hierarchy.relation(
            *oid,
            QualName::new(schema, name),
            cols.map(|(n, c, _)| (*n, c.clone())).collect(),
        );
    }
    for r in rows(up, "inheritance", INHERITS_SQL).await? {
        hierarchy.inherits(num(&r, 0)?, num(&r, 1)?);
    }

    // The policy: configuration rules, then the database's own labels.
    let mut policy = Policy {
        spill_limit,
        ..Policy::default()
    };
    for s in PROXY_MODE_FIXED_SETTINGS {
        policy.allowed_settings.remove(s);
    }
    let mut rules: HashMap<String, dptext_core::mechanisms::MechanismSpec> = HashMap::new();
    let mut protect = |policy: &mut Policy,
                       schema: &str,
                       table: &str,
                       column: &str,
                       spec: &dptext_core::mechanisms::MechanismSpec| {
        let label = mode::label(spec);
        policy.protect(schema, table, column, &label);
        rules.insert(label, spec.clone());
    };
    for r in declared.rules {
        protect(&mut policy, &r.schema, &r.table, &r.column, &r.spec);
    }
    for r in rows(up, "the dptext labels", DB_RULES_SQL).await? {
        let label = cell(&r, 3)?;
        if dptext_core::rules::is_allow_label(label) {
            // Declared safe to read raw: not a rule.
            continue;
        }
        let parsed = dptext_core::rules::parse_column_label(label).map_err(|e| {
            ProxyError::Upstream(format!("a dptext label could not be read ({e}): {label}"))
        })?;
        let (schema, table, column) = (cell(&r, 0)?, cell(&r, 1)?, cell(&r, 2)?);
        let already = policy
            .protected
            .get(&QualName::new(schema, table))
            .is_some_and(|cols| cols.contains_key(column));
        if !already {
            protect(&mut policy, schema, table, column, &parsed.spec);
        }
    }
    for s in declared.sanitized {
        let (schema, name) = mode::qualified(&s.relation)?;
        policy.sanitize(&schema, &name);
    }
    hierarchy.protect_ancestors(&mut policy);
    let splits = hierarchy.splits(&policy, &partition_keys(up).await?, &checks(up).await?);
    // Functions by OID, for the policies' expressions (and by name, for
    // the analyzer).
    let mut functions: HashMap<u32, (QualName, Volatility)> = HashMap::new();
    for r in rows(up, "functions", FUNCTIONS_SQL).await? {
        let kind = match cell(&r, 3)? {
            "a" => FunctionKind::Aggregate,
            "w" => FunctionKind::Window,
            "p" => FunctionKind::Procedure,
            _ => FunctionKind::Function,
        };
        let (schema, name, v) = (cell(&r, 0)?, cell(&r, 1)?, volatility(cell(&r, 2)?));
        catalog.add_function(schema, name, v, kind);
        functions.insert(num(&r, 4)?, (QualName::new(schema, name), v));
    }
    let guarded = row_security::guards(&policies(up).await?, &hierarchy, &policy, &functions);
    let all_indexes = indexes(up).await?;
    let indexed = indexes::ordering(&all_indexes, &hierarchy, &policy, &functions);
    let mut unique_keys = indexes::unique_keys(&all_indexes, &hierarchy, &partitioned);
    let mut derived = generated::derived(
        &generated_columns(up).await?,
        &hierarchy,
        &policy,
        &functions,
    );
    let untrusted = owners::untrusted(
        &hierarchy,
        &relation_owners,
        &policy,
        declared.trusted_owners,
    );

    // Relations, and where protected columns are.
    let mut origins: HashMap<(u32, i16), String> = HashMap::new();
    for (oid, (schema, name, kind)) in &names {
        let cols = columns.get(oid).cloned().unwrap_or_default();
        let ancestors: Vec<QualName> = hierarchy
            .ancestors(*oid)
            .into_iter()
            .filter_map(|a| hierarchy.name(a).cloned())
            .collect();
        let mut owners = vec![QualName::new(schema, name)];
        owners.extend(ancestors.iter().cloned());
        for (attnum, col, typ) in &cols {
            let rule = owners
                .iter()
                .find_map(|o| policy.protected.get(o).and_then(|c| c.get(col)).cloned());
            if let Some(rule) = rule {
                if !TEXT_TYPES.contains(typ) {
                    return Err(ProxyError::Config(format!(
                        "protected column {schema}.{name}.{col} has type oid {typ}: proxy mode sanitizes text, varchar and char columns only"
                    )));
                }
                origins.insert((*oid, *attnum), rule);
            }
        }
        let opaque = cols
            .iter()
            .filter_map(|(_, c, typ)| untrusted_types.get(typ).map(|t| (c.clone(), t.clone())))
            .collect();
        let opaque_row = row_types
            .get(oid)
            .and_then(|t| untrusted_types.get(t))
            .cloned();
        catalog.add_relation(RelationInfo {
            schema: schema.clone(),
            name: name.clone(),
            kind: *kind,
            columns: cols.into_iter().map(|(_, c, _)| c).collect(),
            ancestors,
            opaque,
            opaque_row,
            split: splits.get(oid).cloned(),
            row_security: guarded.get(oid).cloned(),
            untrusted_owner: untrusted.get(oid).cloned(),
            protected_index: indexed.get(oid).cloned(),
            unique_keys: unique_keys.remove(oid).unwrap_or_default(),
            derived: derived.remove(oid).unwrap_or_default(),
        });
    }
    for r in rows(up, "operators", OPERATORS_SQL).await? {
        catalog.add_operator(
            cell(&r, 0)?,
            cell(&r, 1)?,
            QualName::new(cell(&r, 2)?, cell(&r, 3)?),
            volatility(cell(&r, 4)?),
        );
    }
    Ok(SessionCatalog {
        catalog,
        policy,
        search_path,
        user,
        origins,
        rules,
        trusted_types,
        untrusted: untrusted
            .iter()
            .filter_map(|(oid, u)| Some((hierarchy.name(*oid)?.clone(), u.clone())))
            .collect(),
        indexed: indexed
            .iter()
            .filter_map(|(oid, ix)| Some((hierarchy.name(*oid)?.clone(), ix.index.clone())))
            .collect(),
    })
}

/// Prepares every rule of `catalog` in `sanitizer` (off the async
/// runtime's threads: building a rule loads vectors or models), before
/// any of its values is sanitized.
pub async fn prepare_rules(
    sanitizer: &Arc<crate::sanitize::Sanitizer>,
    catalog: &SessionCatalog,
) -> Result<()> {
    let sanitizer = sanitizer.clone();
    let rules: Vec<_> = catalog.rules.clone().into_iter().collect();
    tokio::task::spawn_blocking(move || {
        rules
            .iter()
            .try_for_each(|(label, spec)| sanitizer.prepare(label, spec))
    })
    .await
    .map_err(|e| ProxyError::Protocol(format!("preparing the rules: {e}")))?
}

/// What `dptext-proxy check` says of a proxy-mode user: connects as
/// `login`, reads the catalog as a session would, and counts the protected
/// columns found (a configured column that does not exist, or a trusted
/// owner that is not a role, is reported), and the relations refused for
/// their owner or an index.
pub async fn probe(
    cfg: &crate::config::Upstream,
    login: &crate::upstream::Login,
    config: &crate::config::Config,
) -> Result<String> {
    let rules = mode::column_rules(&config.rules)?;
    let mut up = crate::upstream::connect(cfg, login, &[]).await?;
    let declared = Declared {
        rules: &rules,
        sanitized: &config.sanitized,
        trusted_owners: &config.masking.trusted_owners,
    };
    let c = load(&mut up, declared).await?;
    let roles: HashSet<String> = rows(&mut up, "the roles", ROLES_SQL)
        .await?
        .iter()
        .map(|r| cell(r, 0).map(str::to_owned))
        .collect::<Result<_>>()?;
    let unknown: Vec<&str> = declared
        .trusted_owners
        .iter()
        .filter(|r| !roles.contains(*r))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(ProxyError::Config(format!(
            "[masking] trusted_owners names roles that do not exist upstream: {}",
            unknown.join(", ")
        )));
    }
    let mut missing = Vec::new();
    for (table, cols) in &c.policy.protected {
        let Some(rel) = crate::analysis::Catalog::relation(&c.catalog, &table.schema, &table.name)
        else {
            missing.push(table.to_string());
            continue;
        };
        for col in cols.keys() {
            if !rel.columns.contains(col) {
                missing.push(format!("{table}.{col}"));
            }
        }
    }
    if !missing.is_empty() {
        return Err(ProxyError::Config(format!(
            "protected columns not found upstream: {}",
            missing.join(", ")
        )));
    }
    let mut summary = format!(
        "{} protected column(s) found ({} rule(s)), search_path {}",
        c.origins.len(),
        c.rules.len(),
        c.search_path.join(", ")
    );
    if !c.untrusted.is_empty() {
        let listed: Vec<String> = c
            .untrusted
            .iter()
            .take(LISTED)
            .map(|(r, u)| {
                if &u.relation == r {
                    format!("{r} (of {})", u.owner)
                } else {
                    format!("{r} ({} of {})", u.relation, u.owner)
                }
            })
            .collect();
        summary.push_str(&format!(
            "; {} relation(s) refused for an owner not trusted (masking.trusted_owners): {}{}",
            c.untrusted.len(),
            listed.join(", "),
            if c.untrusted.len() > LISTED {
                ", ..."
            } else {
                ""
            }
        ));
    }
    if !c.indexed.is_empty() {
        let listed: Vec<String> = c
            .indexed
            .iter()
            .take(LISTED)
            .map(|(r, ix)| format!("{r} (index {ix})"))
            .collect();
        summary.push_str(&format!(
            "; {} relation(s) refused for an index on a protected column: {}{}",
            c.indexed.len(),
            listed.join(", "),
            if c.indexed.len() > LISTED {
                ", ..."
            } else {
                ""
            }
        ));
    }
    Ok(summary)
}

/// How many refused relations `dptext-proxy check` names.
const LISTED: usize = 5;
