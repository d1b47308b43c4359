//! Name scopes of a query and column resolution, following PostgreSQL's
//! rules (parse_relation.c): each query level has its `FROM` items and
//! its CTEs; a name is looked up level by level from the innermost; an
//! unqualified column name that matches columns of two items of one level
//! is ambiguous; a name that is no column may be a whole-row reference to
//! an item.

use super::{OutputColumn, Refusal, Rule};

/// System columns of a table: allowed, never protected (they describe the
/// row's storage, not its values).
const SYSTEM_COLUMNS: &[&str] = &["ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"];

/// A column as a scope sees it.
#[derive(Debug, Clone)]
pub(super) struct Col {
    /// Its name at this level.
    pub name: String,
    /// Whether its values are a protected column's raw values.
    pub out: OutputColumn,
}

impl Col {
    /// A plain column.
    pub fn plain(name: impl Into<String>) -> Self {
        Col {
            name: name.into(),
            out: OutputColumn::Plain,
        }
    }
}

/// One entry of a level's name space (a `FROM` item or a join).
#[derive(Debug, Clone)]
pub(super) struct NsItem {
    /// The name it is referred to by (alias or relation name).
    pub name: Option<String>,
    /// The schema, for `schema.table.column` (unaliased relations only).
    pub schema: Option<String>,
    /// Qualified references (`t.c`, `t.*`, `t`) see it.
    pub rel_visible: bool,
    /// Unqualified column names see its columns.
    pub cols_visible: bool,
    /// Its columns in order.
    pub cols: Vec<Col>,
    /// A table: its system columns resolve.
    pub system_columns: bool,
}

/// A CTE visible at a level.
#[derive(Debug, Clone)]
pub(super) struct Cte {
    /// Its name.
    pub name: String,
    /// Its columns.
    pub cols: Vec<Col>,
}

/// A query level: its items and CTEs, and the level around it.
pub(super) struct Scope<'p> {
    /// The enclosing level.
    pub parent: Option<&'p Scope<'p>>,
    /// The `FROM` items visible here.
    pub items: Vec<NsItem>,
    /// The CTEs defined here.
    pub ctes: Vec<Cte>,
}

/// What a column reference denotes.
pub(super) enum Resolved {
    /// A column.
    Column(Col),
    /// A whole row (`t`, `t.*`): the item's columns.
    WholeRow(Vec<Col>),
}

impl<'p> Scope<'p> {
    /// A level with no items and no CTEs under `parent`.
    pub fn new(parent: Option<&'p Scope<'p>>) -> Self {
        Scope {
            parent,
            items: Vec::new(),
            ctes: Vec::new(),
        }
    }

    fn levels(&self) -> impl Iterator<Item = &Scope<'p>> {
        std::iter::successors(Some(self), |s| s.parent)
    }

    /// The CTE `name`, looked up from this level outwards.
    pub fn cte(&self, name: &str) -> Option<&Cte> {
        self.levels()
            .find_map(|l| l.ctes.iter().rev().find(|c| c.name == name))
    }

    /// Resolves a column reference `fields` (`c`, `t.c`, `s.t.c`, with
    /// `*` as the last field for `t.*`).
    pub fn resolve(&self, fields: &[Field<'_>]) -> Result<Resolved, Refusal> {
        let shown = show(fields);
        match fields {
            [Field::Name(c)] => {
                for level in self.levels() {
                    let mut found: Vec<Col> = Vec::new();
                    for item in level.items.iter().filter(|i| i.cols_visible) {
                        found.extend(column_of(item, c));
                    }
                    match found.len() {
                        0 => continue,
                        1 => return Ok(Resolved::Column(found.remove(0))),
                        _ => return Err(ambiguous(&shown)),
                    }
                }
                match self.item(None, c, &shown)? {
                    Some(item) => Ok(Resolved::WholeRow(item.cols.clone())),
                    None => Err(unresolved(&shown)),
                }
            }
            [Field::Name(t), last] => self.qualified(None, t, last, &shown),
            [Field::Name(s), Field::Name(t), last] => self.qualified(Some(s), t, last, &shown),
            _ => Err(unresolved(&shown)),
        }
    }

    fn qualified(
        &self,
        schema: Option<&str>,
        table: &str,
        last: &Field<'_>,
        shown: &str,
    ) -> Result<Resolved, Refusal> {
        let Some(item) = self.item(schema, table, shown)? else {
            return Err(unresolved(shown));
        };
        match last {
            Field::Star => Ok(Resolved::WholeRow(item.cols.clone())),
            Field::Name(c) => {
                let mut found = column_of(item, c);
                match found.len() {
                    1 => Ok(Resolved::Column(found.remove(0))),
                    0 => Err(unresolved(shown)),
                    _ => Err(ambiguous(shown)),
                }
            }
        }
    }

    /// The rel-visible item `[schema.]name`, from the innermost level that
    /// has one; two at one level are ambiguous.
    fn item(
        &self,
        schema: Option<&str>,
        name: &str,
        shown: &str,
    ) -> Result<Option<&NsItem>, Refusal> {
        for level in self.levels() {
            let found: Vec<&NsItem> = level
                .items
                .iter()
                .filter(|i| i.rel_visible && i.name.as_deref() == Some(name))
                .filter(|i| schema.is_none() || i.schema.as_deref() == schema)
                .collect();
            match found.as_slice() {
                [] => continue,
                [one] => return Ok(Some(one)),
                _ => return Err(ambiguous(shown)),
            }
        }
        Ok(None)
    }

    /// Every column `*` stands for at this level.
    pub fn star(&self) -> Vec<Col> {
        self.items
            .iter()
            .filter(|i| i.cols_visible)
            .flat_map(|i| i.cols.iter().cloned())
            .collect()
    }
}

/// One field of a column reference.
#[derive(Debug, Clone, Copy)]
pub(super) enum Field<'a> {
    /// A name.
    Name(&'a str),
    /// `*`.
    Star,
}

fn column_of(item: &NsItem, name: &str) -> Vec<Col> {
    let mut found: Vec<Col> = item
        .cols
        .iter()
        .filter(|c| c.name == name)
        .cloned()
        .collect();
    if found.is_empty() && item.system_columns && SYSTEM_COLUMNS.contains(&name) {
        found.push(Col::plain(name));
    }
    found
}

fn show(fields: &[Field<'_>]) -> String {
    fields
        .iter()
        .map(|f| match f {
            Field::Name(n) => *n,
            Field::Star => "*",
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn ambiguous(shown: &str) -> Refusal {
    Refusal::new(
        Rule::ColumnAmbiguous,
        format!("column reference {shown} is ambiguous: qualify it with its table"),
    )
}

fn unresolved(shown: &str) -> Refusal {
    Refusal::new(
        Rule::ColumnUnresolved,
        format!("column reference {shown} does not name a column the proxy knows"),
    )
}
