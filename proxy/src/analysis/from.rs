//! `FROM` items: relations resolved through the catalog (CTE names first),
//! derived tables, joins, and a few set-returning functions; each becomes
//! name-space items whose columns carry their protection. Join visibility
//! follows PostgreSQL (parse_clause.c): a join's own column list (with
//! `USING` columns merged) is what unqualified names and `*` see; its
//! inputs stay reachable by name unless the join has an alias.

use pg_query::protobuf::{JoinExpr, RangeFunction, RangeVar};
use pg_query::{Node, NodeEnum};

use super::expr::catalog_arguments;
use super::nodes::{construct, names, node_name, protected, Clause, Origin, Outputs};
use super::query::{rename, Walker};
use super::scope::{Col, NsItem, Scope, Withheld};
use super::{OutputColumn, ProtectedColumn, QualName, Refusal, RelationKind, Rule};

impl Walker<'_> {
    /// The items of a `FROM` list; `level` is the query level they belong
    /// to (its CTEs and parent are used, its items are not).
    pub fn range_clause(&self, from: &[Node], level: &Scope<'_>) -> Result<Vec<NsItem>, Refusal> {
        let mut items: Vec<NsItem> = Vec::new();
        for node in from {
            let (new, _) = self.range_item(node, level, &items)?;
            items.extend(new);
        }
        Ok(items)
    }

    /// One `FROM` item: its name-space items and its full column list.
    /// `siblings` are the items before it, which `LATERAL` may read.
    fn range_item(
        &self,
        node: &Node,
        level: &Scope<'_>,
        siblings: &[NsItem],
    ) -> Result<(Vec<NsItem>, Vec<Col>), Refusal> {
        let _depth = self.enter()?;
        match &node.node {
            Some(NodeEnum::RangeVar(r)) => {
                let item = self.relation(r, level)?;
                let cols = item.cols.clone();
                Ok((vec![item], cols))
            }
            Some(NodeEnum::RangeSubselect(s)) => {
                let Some(NodeEnum::SelectStmt(sel)) =
                    s.subquery.as_ref().and_then(|q| q.node.as_ref())
                else {
                    return Err(construct("a derived table that is not a SELECT"));
                };
                let sub_parent = lateral_scope(level, if s.lateral { siblings } else { &[] });
                let cols = self.select(sel, Some(&sub_parent), Outputs::Bare)?;
                let (name, aliases) = alias(&s.alias)?;
                let cols = rename(cols, &aliases);
                Ok((vec![item(name, None, cols.clone(), false)], cols))
            }
            Some(NodeEnum::RangeFunction(f)) => {
                let sub_parent = lateral_scope(level, siblings);
                let item = self.range_function(f, &sub_parent)?;
                let cols = item.cols.clone();
                Ok((vec![item], cols))
            }
            Some(NodeEnum::JoinExpr(j)) => self.join(j, level, siblings),
            Some(NodeEnum::RangeTableSample(_)) => Err(construct("TABLESAMPLE")),
            Some(other) => Err(construct(&format!("FROM item {}", node_name(other)))),
            None => Err(construct("an empty FROM item")),
        }
    }

    fn join(
        &self,
        j: &JoinExpr,
        level: &Scope<'_>,
        siblings: &[NsItem],
    ) -> Result<(Vec<NsItem>, Vec<Col>), Refusal> {
        let (Some(l), Some(r)) = (&j.larg, &j.rarg) else {
            return Err(construct("a join without two sides"));
        };
        let (mut items, lcols) = self.range_item(l, level, siblings)?;
        let mut seen: Vec<NsItem> = siblings.to_vec();
        seen.extend(items.iter().cloned());
        let (ritems, rcols) = self.range_item(r, level, &seen)?;
        items.extend(ritems);

        let using: Vec<String> = if j.is_natural {
            // The common names decide what is compared: every name on
            // both sides must be certain.
            if lcols.iter().chain(&rcols).any(|c| !c.certain) {
                return Err(Refusal::new(
                    Rule::ColumnNameUncertain,
                    "a NATURAL join of a subquery whose expressions have no alias: the proxy \
                     cannot be certain which columns it compares; join with USING or ON, or \
                     name the expressions (AS name)",
                ));
            }
            lcols
                .iter()
                .filter(|c| rcols.iter().any(|r| r.name == c.name))
                .map(|c| c.name.clone())
                .collect()
        } else {
            names(&j.using_clause)
                .ok_or_else(|| construct("USING entries that are not names"))?
                .into_iter()
                .map(str::to_owned)
                .collect()
        };
        for u in &using {
            for side in [&lcols, &rcols] {
                let found: Vec<&Col> = side.iter().filter(|c| c.certain && &c.name == u).collect();
                match found.as_slice() {
                    [one] if one.out.is_restricted() => {
                        return Err(protected(Rule::ProtectedInJoin, &one.out, "to join on"));
                    }
                    [_] => {}
                    // The server may find it under a name the proxy
                    // cannot be certain of.
                    [] if side.iter().any(|c| !c.certain) => {
                        return Err(Refusal::new(
                            Rule::ColumnNameUncertain,
                            format!(
                                "join column {u} could name an output column the proxy cannot \
                                 name for certain: give the subquery's expressions aliases"
                            ),
                        ))
                    }
                    [] => {
                        return Err(Refusal::new(
                            Rule::ColumnUnresolved,
                            format!("join column {u} is not on both sides of the join"),
                        ))
                    }
                    _ => {
                        return Err(Refusal::new(
                            Rule::ColumnAmbiguous,
                            format!("join column {u} appears more than once on one side"),
                        ))
                    }
                }
            }
        }
        if !using.is_empty() {
            // PostgreSQL compares USING and NATURAL columns with `=`,
            // looked up by that unqualified name when the server runs the
            // statement; no SQL qualifies it, so an operator created in a
            // schema of the search path during the session (an exact
            // match where pg_catalog needs a cast) would run instead.
            return Err(Refusal::new(
                Rule::ConstructNotAllowed,
                "JOIN ... USING and NATURAL JOIN compare with an = operator the proxy cannot \
                 pin to pg_catalog: write JOIN ... ON a.x = b.x",
            ));
        }
        if let Some(q) = &j.quals {
            let on = Scope {
                parent: level.parent,
                items: items.clone(),
                ctes: level.ctes.clone(),
            };
            self.expr(q, &on, Clause::Join.cx())?;
        }

        let mut cols: Vec<Col> = using.iter().map(Col::plain).collect();
        cols.extend(lcols.into_iter().filter(|c| !using.contains(&c.name)));
        cols.extend(rcols.into_iter().filter(|c| !using.contains(&c.name)));

        let mut out = Vec::new();
        if let Some(a) = &j.join_using_alias {
            let using_cols: Vec<Col> = using.iter().map(Col::plain).collect();
            let mut it = item(Some(a.aliasname.clone()), None, using_cols, false);
            it.cols_visible = false;
            out.push(it);
        }
        match &j.alias {
            Some(_) => {
                let (name, aliases) = alias(&j.alias)?;
                let cols = rename(cols, &aliases);
                out.push(item(name, None, cols.clone(), false));
                Ok((out, cols))
            }
            None => {
                for i in &mut items {
                    i.cols_visible = false;
                }
                out.extend(items);
                let mut joined = item(None, None, cols.clone(), false);
                joined.rel_visible = false;
                out.push(joined);
                Ok((out, cols))
            }
        }
    }

    /// A relation: a CTE if unqualified and one of that name is visible,
    /// else a catalog relation.
    fn relation(&self, r: &RangeVar, level: &Scope<'_>) -> Result<NsItem, Refusal> {
        let (alias_name, aliases) = alias(&r.alias)?;
        if !r.catalogname.is_empty() {
            return Err(Refusal::new(
                Rule::RelationUnresolved,
                format!("relation {} names a database; leave it out", r.relname),
            ));
        }
        if r.schemaname.is_empty() {
            if let Some(cte) = level.cte(&r.relname) {
                if cte.pending {
                    return Err(Refusal::new(
                        Rule::ConstructNotAllowed,
                        format!(
                            "in WITH RECURSIVE, CTE {} may be read only by the CTEs after it \
                             and by its own recursive term: reorder the list",
                            r.relname
                        ),
                    ));
                }
                let cols = rename(cte.cols.clone(), &aliases);
                let name = alias_name.unwrap_or_else(|| r.relname.clone());
                return Ok(item(Some(name), None, cols, false));
            }
        }
        let schema = (!r.schemaname.is_empty()).then_some(r.schemaname.as_str());
        let shown = match schema {
            Some(s) => format!("{s}.{}", r.relname),
            None => r.relname.clone(),
        };
        let Some(rel) =
            super::catalog::resolve_relation(self.ctx.catalog, &self.path, schema, &r.relname)
        else {
            return Err(Refusal::new(
                Rule::RelationUnresolved,
                format!("relation {shown} is not known to the proxy"),
            ));
        };
        if schema.is_none() {
            let previous = self
                .relations
                .borrow_mut()
                .insert(r.location, rel.schema.clone());
            if previous.is_some_and(|p| p != rel.schema) || r.location < 0 {
                self.conflict.set(true);
            }
        }
        let qn = QualName::new(rel.schema.clone(), rel.name.clone());
        super::guards::readable(&qn, &rel)?;
        let policy = self.ctx.policy;
        let table = rel.kind == RelationKind::Table;
        let cols: Vec<Col> = if policy.sanitized.contains(&qn) {
            rel.columns.iter().map(Col::plain).collect()
        } else if rel.schema == "pg_catalog" || rel.schema == "information_schema" {
            if !policy.catalog_relations.contains(&qn) {
                return Err(Refusal::new(
                    Rule::CatalogRelation,
                    format!("catalog relation {qn} is not on the catalog allow-list"),
                ));
            }
            // Sizes are withheld only where something is protected: they
            // say nothing of values otherwise.
            let withheld = policy
                .size_columns
                .get(&qn)
                .filter(|_| !policy.protected.is_empty());
            rel.columns
                .iter()
                .map(|c| {
                    let mut col = Col::plain(c).of(Origin::Catalog);
                    if withheld.is_some_and(|w| w.contains(c)) {
                        col.withheld = Some(Withheld::Size(format!("{qn}.{c}")));
                    }
                    col
                })
                .collect()
        } else if !table || rel.schema.starts_with("pg_toast") {
            return Err(Refusal::new(
                Rule::RelationKind,
                format!(
                    "relation {qn} is not a table nor declared sanitized ([[sanitized]] in the \
                     proxy's configuration)"
                ),
            ));
        } else {
            let mut cols = self.table_columns(&qn, &rel.columns, &rel.ancestors)?;
            for c in &mut cols {
                if let Some(from) = rel.derived.get(&c.name) {
                    c.withheld = Some(Withheld::Derived(format!("{qn}.{}", c.name), from.clone()));
                }
            }
            cols
        };
        let cols = cols
            .into_iter()
            .map(|mut c| {
                if let (OutputColumn::Plain, Some(t)) = (&c.out, rel.opaque.get(&c.name)) {
                    c.out = OutputColumn::Opaque {
                        column: format!("{qn}.{}", c.name),
                        type_name: t.clone(),
                    };
                }
                c
            })
            .collect();
        let cols = rename(cols, &aliases);
        let renamed = !aliases.is_empty();
        let mut it = match alias_name {
            Some(a) => item(Some(a), None, cols, table),
            None => item(Some(rel.name), Some(rel.schema), cols, table),
        };
        it.row_type = rel.opaque_row;
        if table && !renamed {
            it.unique_keys = rel.unique_keys;
        }
        Ok(it)
    }

    /// A table's columns, protected as the policy says for it and its
    /// ancestors. A protected column the table lacks refuses it: the
    /// policy and the database disagree (a rename?).
    fn table_columns(
        &self,
        qn: &QualName,
        columns: &[String],
        ancestors: &[QualName],
    ) -> Result<Vec<Col>, Refusal> {
        let mut cols: Vec<Col> = columns.iter().map(Col::plain).collect();
        for owner in std::iter::once(qn).chain(ancestors) {
            let Some(protected) = self.ctx.policy.protected.get(owner) else {
                continue;
            };
            for (column, rule) in protected {
                let Some(c) = cols.iter_mut().find(|c| &c.name == column) else {
                    return Err(Refusal::new(
                        Rule::PolicyMismatch,
                        format!(
                            "the policy protects {owner}.{column}, which relation {qn} lacks: \
                             fix the policy"
                        ),
                    ));
                };
                c.out = OutputColumn::Protected(ProtectedColumn {
                    table: qn.clone(),
                    column: column.clone(),
                    rule: rule.clone(),
                });
            }
        }
        Ok(cols)
    }

    /// A set-returning function in `FROM`: only the allowed ones, one
    /// column each (named by the function or its alias, or by its output
    /// parameter: [`NAMED_COLUMNS`]), no column definition list. Its
    /// columns have the origin of its arguments.
    fn range_function(&self, f: &RangeFunction, scope: &Scope<'_>) -> Result<NsItem, Refusal> {
        if !f.coldeflist.is_empty() {
            return Err(from_function("a column definition list"));
        }
        let mut cols = Vec::new();
        let mut first_name = None;
        let mut has_unnest = false;
        let mut named = false;
        for entry in &f.functions {
            let Some(NodeEnum::List(list)) = &entry.node else {
                return Err(from_function("this shape"));
            };
            let call = match list.items.as_slice() {
                [call] => call,
                [call, defs] if defs.node.is_none() => call,
                [call, Node {
                    node: Some(NodeEnum::List(l)),
                }] if l.items.is_empty() => call,
                _ => return Err(from_function("a column definition list")),
            };
            let Some(NodeEnum::FuncCall(call)) = &call.node else {
                return Err(from_function("something that is not a function call"));
            };
            let name = names(&call.funcname)
                .and_then(|n| n.last().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            if !self.ctx.policy.from_functions.contains(&name) {
                return Err(from_function(&format!("function {name}")));
            }
            if name == "unnest" {
                if call.args.len() != 1 {
                    return Err(from_function("unnest of several arrays"));
                }
                has_unnest = true;
            }
            let used = self.check_function(&call.funcname)?;
            let origin = self.exprs(&call.args, scope, Clause::Values.cx())?;
            if used.catalog {
                catalog_arguments(&call.funcname, origin)?;
            }
            first_name.get_or_insert_with(|| name.clone());
            match NAMED_COLUMNS.iter().find(|(n, _)| *n == name) {
                Some((_, out)) => {
                    named = true;
                    cols.extend(out.iter().map(|c| Col::plain(*c).of(origin)));
                }
                None => cols.push(Col::plain(name).of(origin)),
            }
        }
        let (alias_name, aliases) = alias(&f.alias)?;
        if cols.len() == 1 && aliases.is_empty() && !named {
            if let Some(a) = &alias_name {
                cols[0].name = a.clone();
            }
        }
        if f.ordinality {
            cols.push(Col::plain("ordinality").of(Origin::Catalog));
        }
        let mut cols = rename(cols, &aliases);
        if has_unnest {
            // unnest of an array of a composite type returns that type's
            // columns, under names the proxy does not know.
            for c in &mut cols {
                c.certain = false;
            }
        }
        Ok(item(alias_name.or(first_name), None, cols, false))
    }
}

/// The scope a derived table or function in `FROM` sees: the level's
/// CTEs and parent, and the `siblings` it may read laterally.
fn lateral_scope<'p>(level: &'p Scope<'p>, siblings: &[NsItem]) -> Scope<'p> {
    Scope {
        parent: level.parent,
        items: siblings.to_vec(),
        ctes: level.ctes.clone(),
    }
}

fn item(name: Option<String>, schema: Option<String>, cols: Vec<Col>, table: bool) -> NsItem {
    NsItem {
        name,
        schema,
        rel_visible: true,
        cols_visible: true,
        cols,
        system_columns: table,
        row_type: None,
        unique_keys: Vec::new(),
    }
}

/// An alias's name and column names.
fn alias(a: &Option<pg_query::protobuf::Alias>) -> Result<(Option<String>, Vec<&str>), Refusal> {
    match a {
        None => Ok((None, Vec::new())),
        Some(a) => {
            let cols = names(&a.colnames)
                .ok_or_else(|| construct("alias column names that are not names"))?;
            Ok((Some(a.aliasname.clone()), cols))
        }
    }
}

/// Set-returning functions of the allow-list whose columns are named by
/// their output parameters, not by the function or its alias:
/// `FROM pg_partition_ancestors(x) AS a` has a column `relid`.
const NAMED_COLUMNS: &[(&str, &[&str])] = &[("pg_partition_ancestors", &["relid"])];

fn from_function(what: &str) -> Refusal {
    Refusal::new(
        Rule::FunctionInFrom,
        format!(
            "{what} in FROM is not allowed; only generate_series, generate_subscripts, unnest \
             of one array and pg_partition_ancestors may be read as a table"
        ),
    )
}
