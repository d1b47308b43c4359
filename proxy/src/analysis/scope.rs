//! Name scopes of a query and column resolution, following PostgreSQL's
//! rules (parse_relation.c): each query level has its `FROM` items and
//! its CTEs; a name is looked up level by level from the innermost; an
//! unqualified column name that matches columns of two items of one level
//! is ambiguous; a name that is no column may be a whole-row reference to
//! an item.
//!
//! Output columns that no alias names get a name from PostgreSQL's
//! FigureColname, which the analyzer does not reproduce for every
//! expression. Such a name is *uncertain* and resolves nothing: a
//! reference that finds no certain column at a level holding an uncertain
//! one might bind there on the server, so it is allowed only when every
//! column it could bind to is unprotected.

use super::nodes::{Field, Origin};
use super::{OutputColumn, Refusal, Rule};

/// System columns of a table: never protected (they describe the row's
/// storage, not its values), and allowed but for [`LAYOUT_COLUMNS`] and
/// [`TRANSACTION_COLUMNS`].
const SYSTEM_COLUMNS: &[&str] = &["ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"];

/// System columns that name the transaction and command that wrote or
/// locked a row. Refused in every table that is not a catalog, protected
/// columns or not ([`Rule::TransactionColumn`]): a row lock, an `UPDATE`
/// or a `DELETE` leaves its transaction's ID in the row's `xmax`, after a
/// `ROLLBACK` too, so an owner's statement that chose rows of this table by
/// raw values of another (`... JOIN patients p ... WHERE p.name LIKE 'A%'
/// FOR UPDATE OF v`) shows which rows it chose.
const TRANSACTION_COLUMNS: &[&str] = &["xmin", "xmax", "cmin", "cmax"];

/// System columns whose values follow the table's physical layout: a
/// row's `ctid` is its page and slot, and how many rows fit on a page
/// depends on the lengths of their values. In a relation with protected
/// columns they are refused wherever they appear ([`Rule::RowLocation`]).
/// `tableoid` stays: it is one value per table, and a hierarchy a
/// protected column splits is not read at all
/// ([`Rule::ProtectedPartition`]).
const LAYOUT_COLUMNS: &[&str] = &["ctid"];

/// A column as a scope sees it.
#[derive(Debug, Clone)]
pub(super) struct Col {
    /// Its name at this level.
    pub name: String,
    /// Whether its values are a protected column's raw values.
    pub out: OutputColumn,
    /// Whether PostgreSQL gives it exactly this name: a catalog column,
    /// an alias, a bare column reference, a `VALUES` or `USING` column.
    /// An uncertain name (a guess at FigureColname) never resolves a
    /// reference.
    pub certain: bool,
    /// Whether its values come from the catalog only (see [`Origin`]).
    pub origin: Origin,
    /// The qualified name of a catalog column that may not be read at
    /// all (`Policy::size_columns`): any reference to it, `*` and whole
    /// rows that hold it included, is refused.
    pub withheld: Option<Withheld>,
    /// The name (`t.ctid`) of a system column that tells where its row
    /// is stored, of a relation with protected columns (see
    /// [`LAYOUT_COLUMNS`]): any reference to it is refused.
    pub layout: Option<String>,
    /// The name (`t.xmax`) of a transaction column of a table that is not
    /// a catalog (see [`TRANSACTION_COLUMNS`]): any reference to it is
    /// refused.
    pub transaction: Option<String>,
}

impl Col {
    /// A plain column with a certain name, of data (not of the catalog).
    pub fn plain(name: impl Into<String>) -> Self {
        Col {
            name: name.into(),
            out: OutputColumn::Plain,
            certain: true,
            origin: Origin::Data,
            withheld: None,
            layout: None,
            transaction: None,
        }
    }

    /// This column, its values of `origin`.
    pub fn of(self, origin: Origin) -> Self {
        Col { origin, ..self }
    }

    /// A plain column whose name the server may give differently.
    pub fn uncertain(name: impl Into<String>) -> Self {
        Col {
            certain: false,
            ..Col::plain(name)
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
    /// Its whole-row value's type, when a role that is not a superuser
    /// owns it (see `RelationInfo::opaque_row`): a whole-row reference
    /// may then only be output bare.
    pub row_type: Option<String>,
    /// A table's unique keys (`RelationInfo::unique_keys`), by its
    /// columns' names here; empty for anything else, and for a table whose
    /// alias renames its columns.
    pub unique_keys: Vec<Vec<String>>,
}

impl NsItem {
    /// Whether a column of it has a name the server may give differently.
    fn uncertain(&self) -> bool {
        self.cols.iter().any(|c| !c.certain)
    }
}

/// A CTE visible at a level.
#[derive(Debug, Clone)]
pub(super) struct Cte {
    /// Its name.
    pub name: String,
    /// Its columns.
    pub cols: Vec<Col>,
    /// A CTE of a `WITH RECURSIVE` list that the CTE being analyzed may
    /// not read: one defined later in the list (PostgreSQL would resolve
    /// the name to it) or the CTE itself outside its recursive term.
    pub pending: bool,
}

impl Cte {
    /// A pending entry for `name`: a reference to it is refused.
    pub fn pending(name: &str) -> Self {
        Cte {
            name: name.to_owned(),
            cols: Vec::new(),
            pending: true,
        }
    }
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
    /// A whole row (`t`, `t.*`): the item's columns, and its type when
    /// another role owns it (`NsItem::row_type`).
    WholeRow(Vec<Col>, Option<String>),
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
    /// `*` as the last field for `t.*`). A withheld column, or a whole row
    /// that holds one, is refused.
    pub fn resolve(&self, fields: &[Field<'_>]) -> Result<Resolved, Refusal> {
        let shown = show(fields);
        let resolved = match fields {
            [Field::Name(c)] => self.unqualified(c, &shown),
            [Field::Name(t), last] => self.qualified(None, t, last, &shown),
            [Field::Name(s), Field::Name(t), last] => self.qualified(Some(s), t, last, &shown),
            _ => Err(unresolved(&shown)),
        }?;
        match &resolved {
            Resolved::Column(c) => {
                not_withheld(std::slice::from_ref(c))?;
                if let Some(name) = &c.layout {
                    return Err(row_location(name));
                }
                if let Some(name) = &c.transaction {
                    return Err(transaction_column(name));
                }
            }
            Resolved::WholeRow(cols, _) => not_withheld(cols)?,
        }
        Ok(resolved)
    }

    /// An unqualified name: a column of the innermost level that has one,
    /// else a whole row. A level with an uncertain column name may bind
    /// it on the server where the analyzer sees no match, so past such a
    /// level only an unprotected column or row is accepted.
    fn unqualified(&self, c: &str, shown: &str) -> Result<Resolved, Refusal> {
        let mut passed_uncertain = false;
        for level in self.levels() {
            let mut found: Vec<Col> = Vec::new();
            let mut uncertain = false;
            for item in level.items.iter().filter(|i| i.cols_visible) {
                found.extend(column_of(item, c));
                uncertain |= item.uncertain();
            }
            match found.len() {
                0 => passed_uncertain |= uncertain,
                1 => {
                    let col = found.remove(0);
                    if passed_uncertain && col.out.is_restricted() {
                        return Err(uncertain_name(shown));
                    }
                    return Ok(Resolved::Column(col));
                }
                _ => return Err(ambiguous(shown)),
            }
        }
        match self.item(None, c, shown)? {
            Some(item) => {
                if passed_uncertain && item.cols.iter().any(|c| c.out.is_restricted()) {
                    return Err(uncertain_name(shown));
                }
                Ok(Resolved::WholeRow(item.cols.clone(), item.row_type.clone()))
            }
            // Only an uncertain-named column, always unprotected, can be
            // what the server binds it to (or it fails).
            None if passed_uncertain => Ok(Resolved::Column(Col::uncertain(c))),
            None => Err(unresolved(shown)),
        }
    }

    /// Whether `name` names a column of this level's own `FROM` items
    /// (GROUP BY looks there before the output names, and not outwards).
    pub fn is_local_column(&self, name: &str) -> bool {
        self.items
            .iter()
            .filter(|i| i.cols_visible)
            .any(|i| !column_of(i, name).is_empty())
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
            Field::Star => Ok(Resolved::WholeRow(item.cols.clone(), item.row_type.clone())),
            Field::Name(c) => {
                let mut found = column_of(item, c);
                match found.len() {
                    1 => Ok(Resolved::Column(found.remove(0))),
                    0 if item.uncertain() => Err(uncertain_name(shown)),
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

    /// Every column `*` stands for at this level; refused when one is
    /// withheld.
    pub fn star(&self) -> Result<Vec<Col>, Refusal> {
        let cols: Vec<Col> = self
            .items
            .iter()
            .filter(|i| i.cols_visible)
            .flat_map(|i| i.cols.iter().cloned())
            .collect();
        not_withheld(&cols)?;
        Ok(cols)
    }
}

/// Why a column may not be read at all.
#[derive(Debug, Clone)]
pub(super) enum Withheld {
    /// A catalog column of relations' sizes (`Policy::size_columns`),
    /// by its qualified name.
    Size(String),
    /// A generated column (`RelationInfo::derived`), by its qualified
    /// name, with the protected column it reads (or why it is taken to
    /// read one).
    Derived(String, String),
}

/// Refuses the first withheld column of `cols`.
fn not_withheld(cols: &[Col]) -> Result<(), Refusal> {
    match cols.iter().find_map(|c| c.withheld.as_ref()) {
        Some(Withheld::Size(name)) => Err(Refusal::new(
            Rule::RelationSize,
            format!(
                "column {name} counts a relation's rows or pages, which protected values decide \
                 for partitions, partial indexes and TOAST tables: it may not be read in a \
                 session with protected columns (select the columns you need by name)"
            ),
        )),
        Some(Withheld::Derived(name, from)) => Err(Refusal::new(
            Rule::DerivedColumn,
            format!(
                "column {name} is generated from {from}: its values are computed from raw \
                 protected values, so it may not be read (select the columns you need by name)"
            ),
        )),
        None => Ok(()),
    }
}

/// The columns of `item` certainly named `name` (system columns of a
/// table included; one that follows the physical layout of a table with
/// protected columns, or names a transaction, is marked to be refused,
/// see [`LAYOUT_COLUMNS`] and [`TRANSACTION_COLUMNS`]).
pub(super) fn column_of(item: &NsItem, name: &str) -> Vec<Col> {
    let mut found: Vec<Col> = item
        .cols
        .iter()
        .filter(|c| c.certain && c.name == name)
        .cloned()
        .collect();
    if found.is_empty() && item.system_columns && SYSTEM_COLUMNS.contains(&name) {
        let mut col = Col::plain(name);
        let protected = item
            .cols
            .iter()
            .any(|c| matches!(c.out, OutputColumn::Protected(_)));
        let table = item.name.as_deref().unwrap_or("?");
        if protected && LAYOUT_COLUMNS.contains(&name) {
            col.layout = Some(format!("{table}.{name}"));
        }
        let catalog =
            !item.cols.is_empty() && item.cols.iter().all(|c| c.origin == Origin::Catalog);
        if !catalog && TRANSACTION_COLUMNS.contains(&name) {
            col.transaction = Some(format!("{table}.{name}"));
        }
        found.push(col);
    }
    found
}

/// The text of a column reference's fields (`t.c`, `t.*`).
pub(super) fn show(fields: &[Field<'_>]) -> String {
    fields
        .iter()
        .map(|f| match f {
            Field::Name(n) => *n,
            Field::Star => "*",
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// A refusal of system column `name` (`t.ctid`) of a table with
/// protected columns.
fn row_location(name: &str) -> Refusal {
    Refusal::new(
        Rule::RowLocation,
        format!(
            "column {name} is where the row is stored, and how rows fill pages depends on the \
             lengths of the table's protected values: it may not be read from a table with \
             protected columns"
        ),
    )
}

fn transaction_column(name: &str) -> Refusal {
    Refusal::new(
        Rule::TransactionColumn,
        format!(
            "column {name} names the transaction that wrote or locked the row, which shows the \
             rows an owner's statement chose by raw values of another table: it may not be read \
             from a table"
        ),
    )
}

fn ambiguous(shown: &str) -> Refusal {
    Refusal::new(
        Rule::ColumnAmbiguous,
        format!("column reference {shown} is ambiguous: qualify it with its table"),
    )
}

fn uncertain_name(shown: &str) -> Refusal {
    Refusal::new(
        Rule::ColumnNameUncertain,
        format!(
            "column reference {shown} could name an output column the proxy cannot name for \
             certain: give the subquery's expressions aliases (AS name) or qualify the reference"
        ),
    )
}

fn unresolved(shown: &str) -> Refusal {
    Refusal::new(
        Rule::ColumnUnresolved,
        format!("column reference {shown} does not name a column the proxy knows"),
    )
}
