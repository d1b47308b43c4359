//! Row-level security policies, as proxy mode must see them.
//!
//! Every row a read of a table with row-level security returns satisfies
//! the `USING` expressions of the policies that apply to the reader. When
//! one of them reads a protected column (`note LIKE '%cancer%'`, or
//! `lower(note)`, or the whole row), the rows the session sees, and their
//! count, tell which raw values pass it; so the relation is marked and the
//! analyzer refuses to read it ([`guards`]).
//!
//! A policy's expression is read from its stored node tree
//! (`pg_policy.polqual`, in PostgreSQL's `nodeToString` form, [`read`]):
//! the columns of its table it reads, the functions it calls, and whether
//! it holds anything the reader does not follow. What cannot be followed
//! is taken to read protected columns: a subquery (it reads other tables,
//! under their own policies), a function other than a STABLE or IMMUTABLE
//! `pg_catalog` one off the deny-list (a function can read any table),
//! and any node outside a short list of plain expressions (domain checks
//! run their owner's functions, for one).

use std::collections::{BTreeSet, HashMap};

use crate::analysis::{Policy, PolicyReads, QualName, RowSecurity, Volatility};

use super::hierarchy::Hierarchy;

/// A policy that applies to the session's reads of a relation (a `SELECT`
/// or `ALL` policy for its role, PUBLIC or a role it has the privileges
/// of, on a relation whose row-level security is active for it).
#[derive(Debug, Clone)]
pub(super) struct PolicyQual {
    /// The relation (`polrelid`).
    pub relation: u32,
    /// The policy's name.
    pub name: String,
    /// Its `USING` expression's node tree (`polqual::text`); `None` when
    /// it has none.
    pub qual: Option<String>,
}

/// What a `USING` expression reads.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Qual {
    /// Columns of the policy's table, by number; 0 stands for a whole-row
    /// reference. System columns are left out.
    pub columns: BTreeSet<i16>,
    /// The functions it calls, operators' included, by OID.
    pub functions: BTreeSet<u32>,
    /// Why it cannot be followed, when it cannot.
    pub opaque: Option<PolicyReads>,
}

/// Expression nodes whose evaluation runs no code but the functions they
/// name by OID (checked apart) and `pg_catalog`'s or a superuser's: the
/// I/O and comparison functions of types only a superuser can create.
/// Anything else refuses the policy's table: `SUBLINK` reads other tables,
/// `COERCETODOMAIN` runs a domain's checks, `ROWCOMPAREEXPR` names
/// operators rather than functions, and nodes of later PostgreSQL
/// versions are not known.
const PLAIN_NODES: &[&str] = &[
    "VAR",
    "CONST",
    "FUNCEXPR",
    "OPEXPR",
    "DISTINCTEXPR",
    "NULLIFEXPR",
    "SCALARARRAYOPEXPR",
    "BOOLEXPR",
    "NULLTEST",
    "BOOLEANTEST",
    "RELABELTYPE",
    "COERCEVIAIO",
    "ARRAYCOERCEEXPR",
    "CONVERTROWTYPEEXPR",
    "COLLATEEXPR",
    "CASEEXPR",
    "CASEWHEN",
    "CASETESTEXPR",
    "ARRAYEXPR",
    "ROWEXPR",
    "COALESCEEXPR",
    "MINMAXEXPR",
    "SQLVALUEFUNCTION",
    "FIELDSELECT",
    "SUBSCRIPTINGREF",
];

/// Fields that name a function by OID; in the first two a 0 means the
/// function was not recorded.
const FUNCTION_FIELDS: &[&str] = &[":funcid", ":opfuncid", ":hashfuncid", ":negfuncid"];

/// The tokens of a node tree, as PostgreSQL's `pg_strtok` reads them:
/// `(`, `)`, `{` and `}` alone, anything else up to white space or one of
/// those, a backslash taking the next character as it is.
fn tokens(tree: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = tree.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if "(){}".contains(c) {
            chars.next();
            out.push(c.to_string());
        } else {
            let mut token = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || "(){}".contains(c) {
                    break;
                }
                chars.next();
                if c == '\\' {
                    if let Some(escaped) = chars.next() {
                        token.push(escaped);
                    }
                } else {
                    token.push(c);
                }
            }
            out.push(token);
        }
    }
    out
}

/// An open `{...}` node or `(...)` list.
enum Frame {
    Node {
        tag: String,
        fields: HashMap<String, String>,
    },
    List,
}

fn construct(what: &str) -> Qual {
    Qual {
        opaque: Some(PolicyReads::Construct(what.to_owned())),
        ..Qual::default()
    }
}

/// The first function `q` calls that is not `pg_catalog`'s (or that
/// `functions` does not know), named for a message: such a function may
/// read any column it is given, or any table.
pub(super) fn foreign_function(
    q: &Qual,
    functions: &HashMap<u32, (QualName, Volatility)>,
) -> Option<String> {
    q.functions.iter().find_map(|f| match functions.get(f) {
        Some((name, _)) if name.schema == "pg_catalog" => None,
        Some((name, _)) => Some(format!("function {name}")),
        None => Some(format!("a function the proxy does not know (oid {f})")),
    })
}

/// Reads a `USING` expression's node tree. What it cannot read is opaque.
pub(super) fn read(tree: &str) -> Qual {
    let tokens = tokens(tree);
    let mut qual = Qual::default();
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        i += 1;
        match t {
            "{" => {
                let Some(tag) = tokens.get(i) else {
                    return construct("a truncated node tree");
                };
                i += 1;
                if tag == "SUBLINK" {
                    qual.opaque = Some(PolicyReads::Subquery);
                    return qual;
                }
                if !PLAIN_NODES.contains(&tag.as_str()) {
                    return construct(tag);
                }
                stack.push(Frame::Node {
                    tag: tag.clone(),
                    fields: HashMap::new(),
                });
            }
            "(" => stack.push(Frame::List),
            "}" => match stack.pop() {
                Some(Frame::Node { tag, fields }) => {
                    if tag == "VAR" {
                        if let Err(q) = var(&fields, &mut qual) {
                            return q;
                        }
                    }
                }
                _ => return construct("an unbalanced node tree"),
            },
            ")" => match stack.pop() {
                Some(Frame::List) => {}
                _ => return construct("an unbalanced node tree"),
            },
            field if field.starts_with(':') => {
                // A field's value is the next token unless a node or a
                // list opens there.
                let Some(value) = tokens
                    .get(i)
                    .filter(|v| !matches!(v.as_str(), "(" | ")" | "{" | "}"))
                else {
                    continue;
                };
                i += 1;
                if FUNCTION_FIELDS.contains(&field) {
                    match value.parse::<u32>() {
                        Ok(0) if field == ":funcid" || field == ":opfuncid" => {
                            return construct("an operator whose function is not recorded")
                        }
                        Ok(0) => {}
                        Ok(oid) => {
                            qual.functions.insert(oid);
                        }
                        Err(_) => return construct("a function that is not an OID"),
                    }
                }
                if let Some(Frame::Node { fields, .. }) = stack.last_mut() {
                    fields.insert(field.to_owned(), value.clone());
                }
            }
            _ => {}
        }
    }
    if !stack.is_empty() || tokens.is_empty() {
        return construct("an unbalanced node tree");
    }
    qual
}

/// Records a `VAR`: a column of the policy's table (range-table entry 1,
/// this query level), a whole row, or a system column (left out).
fn var(fields: &HashMap<String, String>, qual: &mut Qual) -> Result<(), Qual> {
    let int = |name: &str| fields.get(name).and_then(|v| v.parse::<i32>().ok());
    let (Some(varno), Some(attno), Some(up)) =
        (int(":varno"), int(":varattno"), int(":varlevelsup"))
    else {
        return Err(construct("a column reference it cannot read"));
    };
    if varno != 1 || up != 0 {
        return Err(construct("a column of another relation"));
    }
    if attno >= 0 {
        let attno = i16::try_from(attno).map_err(|_| construct("a column number out of range"))?;
        qual.columns.insert(attno);
    }
    Ok(())
}

/// Whether a policy's expression may call function `oid`: a `pg_catalog`
/// function, STABLE or IMMUTABLE (a VOLATILE one can do anything), and
/// not on the deny-list (those that run queries given as text or read
/// tables by name are there).
fn followed(functions: &HashMap<u32, (QualName, Volatility)>, policy: &Policy, oid: u32) -> bool {
    functions.get(&oid).is_some_and(|(name, volatility)| {
        name.schema == "pg_catalog"
            && *volatility != Volatility::Volatile
            && !policy.denied_functions.contains(&name.name)
    })
}

/// The relations whose rows a policy in `quals` filters by a protected
/// column of theirs (their own rule or an ancestor's, in `policy`), or,
/// while anything is protected, by what cannot be followed. Call after
/// `Hierarchy::protect_ancestors`. `functions` names every function by
/// OID, with its volatility.
pub(super) fn guards(
    quals: &[PolicyQual],
    hierarchy: &Hierarchy,
    policy: &Policy,
    functions: &HashMap<u32, (QualName, Volatility)>,
) -> HashMap<u32, RowSecurity> {
    let mut sorted: Vec<&PolicyQual> = quals.iter().collect();
    sorted.sort_by(|a, b| (a.relation, &a.name).cmp(&(b.relation, &b.name)));
    let mut out: HashMap<u32, RowSecurity> = HashMap::new();
    for p in sorted {
        let Some(tree) = &p.qual else { continue };
        if out.contains_key(&p.relation) || hierarchy.name(p.relation).is_none() {
            continue;
        }
        let q = read(tree);
        let reads = match q.opaque {
            Some(opaque) => Some(opaque),
            None => hierarchy
                .protected_column(policy, p.relation, &Some(q.columns))
                .map(PolicyReads::Column)
                .or_else(|| {
                    q.functions
                        .iter()
                        .find(|&&f| !followed(functions, policy, f))
                        .map(|f| {
                            PolicyReads::Function(
                                functions
                                    .get(f)
                                    .map(|(n, _)| n.to_string())
                                    .unwrap_or_else(|| format!("with OID {f}")),
                            )
                        })
                }),
        };
        let Some(reads) = reads else { continue };
        // What cannot be followed may read any table, but discloses
        // nothing while nothing is protected.
        if !matches!(reads, PolicyReads::Column(_)) && policy.protected.is_empty() {
            continue;
        }
        tracing::debug!(relation = p.relation, policy = %p.name, ?reads, "row-level security policy reads protected values");
        out.insert(
            p.relation,
            RowSecurity {
                policy: p.name.clone(),
                reads,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `USING (note LIKE '%x%')` on `t(id, note, ward, d)`, as PostgreSQL
    /// 15 stores it.
    const LIKE_NOTE: &str = "{OPEXPR :opno 1209 :opfuncid 850 :opresulttype 16 :opretset false \
        :opcollid 0 :inputcollid 100 :args ({VAR :varno 1 :varattno 2 :vartype 25 :vartypmod -1 \
        :varcollid 100 :varlevelsup 0 :varnosyn 1 :varattnosyn 2 :location 48} {CONST \
        :consttype 25 :consttypmod -1 :constcollid 100 :constlen -1 :constbyval false \
        :constisnull false :location 58 :constvalue 7 [ 28 0 0 0 37 120 37 ]}) :location 53}";

    /// `USING (ward = current_user AND lower(ward) = 'a' AND d > now())`.
    const WARD: &str = "{BOOLEXPR :boolop and :args ({OPEXPR :opno 260 :opfuncid 247 \
        :opresulttype 16 :opretset false :opcollid 0 :inputcollid 950 :args ({VAR :varno 1 \
        :varattno 3 :vartype 25 :vartypmod -1 :varcollid 100 :varlevelsup 0 :varnosyn 1 \
        :varattnosyn 3 :location 37} {SQLVALUEFUNCTION :op 10 :type 19 :typmod -1 :location \
        44}) :location 42} {OPEXPR :opno 98 :opfuncid 67 :opresulttype 16 :opretset false \
        :opcollid 0 :inputcollid 100 :args ({FUNCEXPR :funcid 870 :funcresulttype 25 \
        :funcretset false :funcvariadic false :funcformat 0 :funccollid 100 :inputcollid 100 \
        :args ({VAR :varno 1 :varattno 3 :vartype 25 :vartypmod -1 :varcollid 100 \
        :varlevelsup 0 :varnosyn 1 :varattnosyn 3 :location 67}) :location 61} {CONST \
        :consttype 25 :consttypmod -1 :constcollid 100 :constlen -1 :constbyval false \
        :constisnull false :location 75 :constvalue 5 [ 20 0 0 0 97 ]}) :location 73} {OPEXPR \
        :opno 2362 :opfuncid 2354 :opresulttype 16 :opretset false :opcollid 0 :inputcollid 0 \
        :args ({VAR :varno 1 :varattno 4 :vartype 1082 :vartypmod -1 :varcollid 0 \
        :varlevelsup 0 :varnosyn 1 :varattnosyn 4 :location 83} {FUNCEXPR :funcid 1299 \
        :funcresulttype 1184 :funcretset false :funcvariadic false :funcformat 0 :funccollid 0 \
        :inputcollid 0 :args <> :location 87}) :location 85}) :location 57}";

    /// `USING (EXISTS (SELECT 1 FROM o WHERE o.id = t.id))`, cut short.
    const EXISTS: &str = "{SUBLINK :subLinkType 0 :subLinkId 0 :testexpr <> :operName <> \
        :subselect {QUERY :commandType 1 :rtable ({RANGETBLENTRY :alias <> :eref {ALIAS \
        :aliasname o :colnames (\"id\" \"note\")} :rtekind 0 :relid 19188})} :location 37}";

    /// `USING (f(id) AND t IS NOT NULL)`: a function of the owner's and
    /// a whole-row reference.
    const WHOLE_ROW: &str = "{BOOLEXPR :boolop and :args ({FUNCEXPR :funcid 19193 \
        :funcresulttype 16 :funcretset false :funcvariadic false :funcformat 0 :funccollid 0 \
        :inputcollid 0 :args ({VAR :varno 1 :varattno 1 :vartype 23 :vartypmod -1 :varcollid 0 \
        :varlevelsup 0 :varnosyn 1 :varattnosyn 1 :location 47}) :location 37} {NULLTEST :arg \
        {VAR :varno 1 :varattno 0 :vartype 19185 :vartypmod -1 :varcollid 0 :varlevelsup 0 \
        :varnosyn 1 :varattnosyn 0 :location 55} :nulltesttype 1 :argisrow true :location \
        57}) :location 51}";

    fn set<T: Ord + Copy>(items: &[T]) -> BTreeSet<T> {
        items.iter().copied().collect()
    }

    #[test]
    fn the_columns_and_functions_of_an_expression_are_read() {
        let q = read(LIKE_NOTE);
        assert_eq!(q.columns, set(&[2]));
        assert_eq!(q.functions, set(&[850]));
        assert_eq!(q.opaque, None);
        let q = read(WARD);
        assert_eq!(q.columns, set(&[3, 4]));
        assert_eq!(q.functions, set(&[247, 67, 870, 2354, 1299]));
        assert_eq!(q.opaque, None);
        let q = read(WHOLE_ROW);
        assert_eq!(q.columns, set(&[0, 1]));
        assert_eq!(q.functions, set(&[19193]));
        // A system column (ctid is -1) reads no value.
        let q = read(
            "{NULLTEST :arg {VAR :varno 1 :varattno -1 :vartype 27 :varlevelsup 0} \
             :nulltesttype 1}",
        );
        assert_eq!((q.columns.len(), q.opaque), (0, None));
    }

    #[test]
    fn what_the_reader_does_not_follow_is_opaque() {
        assert_eq!(read(EXISTS).opaque, Some(PolicyReads::Subquery));
        let cases = [
            (
                "{COERCETODOMAIN :arg {VAR :varno 1 :varattno 1 :varlevelsup 0}}",
                "COERCETODOMAIN",
            ),
            (
                "{ROWCOMPAREEXPR :rctype 1 :opnos (o 97 664)}",
                "ROWCOMPAREEXPR",
            ),
            ("{OPEXPR :opno 98 :opfuncid 0 :args <>}", "not recorded"),
            (
                "{VAR :varno 2 :varattno 1 :varlevelsup 0}",
                "another relation",
            ),
            (
                "{VAR :varno 1 :varattno 1 :varlevelsup 1}",
                "another relation",
            ),
            ("{VAR :varno 1 :varlevelsup 0}", "cannot read"),
            ("{OPEXPR :opno 98 :opfuncid 67 :args (", "unbalanced"),
            ("{OPEXPR :opno 98 :opfuncid 67})", "unbalanced"),
            ("", "unbalanced"),
            ("{", "truncated"),
        ];
        for (tree, why) in cases {
            match read(tree).opaque {
                Some(PolicyReads::Construct(c)) => assert!(c.contains(why), "{tree}: {c}"),
                other => panic!("{tree}: {other:?}"),
            }
        }
    }

    #[test]
    fn escaped_characters_stay_in_their_token() {
        assert_eq!(
            tokens(r#"{ROWEXPR :colnames ("a\ b" "c\}") :x \-1}"#),
            [
                "{",
                "ROWEXPR",
                ":colnames",
                "(",
                "\"a b\"",
                "\"c}\"",
                ")",
                ":x",
                "-1",
                "}"
            ]
        );
        // A column named like a node does not open one.
        let q = read(
            r#"{ROWEXPR :args ({VAR :varno 1 :varattno 2 :varlevelsup 0}) :colnames ("\{SUBLINK")}"#,
        );
        assert_eq!((q.columns, q.opaque), (set(&[2]), None));
    }

    /// `t(id, note, ward, d)` (OID 1) with `note` protected, its partition
    /// `t_a` (2), and `u(id, ward)` (3) with nothing protected.
    fn fixture() -> (Hierarchy, Policy, HashMap<u32, (QualName, Volatility)>) {
        let mut h = Hierarchy::new();
        let cols = super::super::hierarchy::numbered;
        h.relation(
            1,
            QualName::new("public", "t"),
            cols(&["id", "note", "ward", "d"]),
        );
        h.relation(
            2,
            QualName::new("public", "t_a"),
            cols(&["id", "note", "ward", "d"]),
        );
        h.relation(3, QualName::new("public", "u"), cols(&["id", "ward"]));
        h.inherits(2, 1);
        let mut p = Policy::default();
        p.protect("public", "t", "note", "santext");
        let pg = |name: &str, v| (QualName::new("pg_catalog", name), v);
        let functions = HashMap::from([
            (850, pg("textlike", Volatility::Immutable)),
            (67, pg("texteq", Volatility::Immutable)),
            (247, pg("nameeqtext", Volatility::Immutable)),
            (870, pg("lower", Volatility::Immutable)),
            (2354, pg("date_gt_timestamptz", Volatility::Stable)),
            (1299, pg("now", Volatility::Stable)),
            (2, pg("random", Volatility::Volatile)),
            (3, pg("query_to_xml", Volatility::Stable)),
            (19193, (QualName::new("public", "f"), Volatility::Stable)),
        ]);
        (h, p, functions)
    }

    fn on(relation: u32, tree: &str) -> PolicyQual {
        PolicyQual {
            relation,
            name: format!("p{relation}"),
            qual: Some(tree.to_owned()),
        }
    }

    fn call(funcid: u32) -> String {
        format!("{{FUNCEXPR :funcid {funcid} :args ({{VAR :varno 1 :varattno 1 :varlevelsup 0}})}}")
    }

    #[test]
    fn a_policy_on_a_protected_column_guards_its_own_table_only() {
        let (h, p, f) = fixture();
        let g = guards(&[on(1, LIKE_NOTE)], &h, &p, &f);
        assert_eq!(g.len(), 1);
        assert_eq!(g[&1].policy, "p1");
        assert_eq!(g[&1].reads, PolicyReads::Column("note".into()));
        // On the partition (protected through its parent), likewise; the
        // parent is not filtered by it.
        let g = guards(&[on(2, LIKE_NOTE)], &h, &p, &f);
        assert_eq!(g.keys().copied().collect::<Vec<_>>(), [2]);
        // A whole row reads the protected column too.
        let g = guards(&[on(1, WHOLE_ROW)], &h, &p, &f);
        assert_eq!(g[&1].reads, PolicyReads::Column("note".into()));
        // Unprotected columns through pg_catalog functions: nothing.
        assert!(guards(&[on(1, WARD)], &h, &p, &f).is_empty());
        // A policy without USING, or on a relation the catalog lacks.
        let none = PolicyQual {
            qual: None,
            ..on(1, LIKE_NOTE)
        };
        assert!(guards(&[none, on(9, LIKE_NOTE)], &h, &p, &f).is_empty());
        // Nothing protected: a policy discloses nothing.
        assert!(guards(&[on(1, LIKE_NOTE)], &h, &Policy::default(), &f).is_empty());
    }

    #[test]
    fn what_cannot_be_followed_guards_any_table_while_anything_is_protected() {
        let (h, p, f) = fixture();
        let g = guards(&[on(3, EXISTS)], &h, &p, &f);
        assert_eq!(g[&3].reads, PolicyReads::Subquery);
        for (oid, shown) in [
            (19193, "public.f"),
            (2, "pg_catalog.random"),
            (3, "pg_catalog.query_to_xml"),
            (4, "with OID 4"),
        ] {
            let g = guards(&[on(3, &call(oid))], &h, &p, &f);
            assert_eq!(g[&3].reads, PolicyReads::Function(shown.into()), "{oid}");
        }
        let g = guards(&[on(3, "{COERCETODOMAIN :arg <>}")], &h, &p, &f);
        assert_eq!(g[&3].reads, PolicyReads::Construct("COERCETODOMAIN".into()));
        // A followed function of an unprotected column: nothing.
        assert!(guards(&[on(3, &call(870))], &h, &p, &f).is_empty());
        // Nothing protected: nothing to fear.
        assert!(guards(&[on(3, EXISTS)], &h, &Policy::default(), &f).is_empty());
        // The first policy by name is reported.
        let second = PolicyQual {
            name: "a_first".into(),
            ..on(1, WHOLE_ROW)
        };
        let g = guards(&[on(1, LIKE_NOTE), second], &h, &p, &f);
        assert_eq!(g[&1].policy, "a_first");
    }
}
