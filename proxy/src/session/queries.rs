//! The SQL of proxy mode's catalog reads (`super::catalog`).
//!
//! They run as the masked user's upstream role, with its privileges, and
//! must run none of another role's code: every operator is named
//! `OPERATOR(pg_catalog.x)`, every function, type and relation with
//! `pg_catalog`, and a list compared with `= ANY` of a `pg_catalog` array
//! rather than `IN` (whose `=` is looked up by name). The reads also run
//! with the path pinned to `pg_catalog` (`super::pinned`); the test below
//! checks that no query relies on it.

/// Relations, with their owner (`pg_class.relowner`: its name, and
/// whether it is a superuser).
pub(super) const RELATIONS_SQL: &str = "SELECT c.oid, n.nspname, c.relname, c.relkind, c.reltype, \
       pg_catalog.pg_get_userbyid(c.relowner)::pg_catalog.text, COALESCE(r.rolsuper, false) \
  FROM pg_catalog.pg_class c \
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) c.relowner \
 WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,v,m,f}'::pg_catalog.\"char\"[])";
pub(super) const COLUMNS_SQL: &str = "SELECT a.attrelid, a.attnum, a.attname, a.atttypid \
  FROM pg_catalog.pg_attribute a \
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.attrelid \
 WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,v,m,f}'::pg_catalog.\"char\"[]) \
   AND a.attnum OPERATOR(pg_catalog.>) 0::pg_catalog.int2 AND NOT a.attisdropped \
 ORDER BY a.attrelid, a.attnum";
pub(super) const INHERITS_SQL: &str = "SELECT inhrelid, inhparent FROM pg_catalog.pg_inherits";
/// The columns of every partition key: those it names (`partattrs`; 0
/// for an expression, `e`) and those its expressions read, which
/// PostgreSQL records as internal dependencies of the table's columns on
/// the table itself (`d`).
pub(super) const PARTITION_KEYS_SQL: &str = "SELECT p.partrelid, a.attnum, 'e' \
  FROM pg_catalog.pg_partitioned_table p, \
       pg_catalog.unnest(p.partattrs::pg_catalog.int2[]) AS a(attnum) \
UNION ALL \
SELECT d.objid, d.objsubid, 'd' \
  FROM pg_catalog.pg_depend d \
  JOIN pg_catalog.pg_partitioned_table p ON p.partrelid OPERATOR(pg_catalog.=) d.objid \
 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid \
   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid \
   AND d.refobjid OPERATOR(pg_catalog.=) d.objid \
   AND d.refobjsubid OPERATOR(pg_catalog.=) 0 \
   AND d.objsubid OPERATOR(pg_catalog.>) 0 \
   AND d.deptype OPERATOR(pg_catalog.=) 'i'::pg_catalog.\"char\"";
/// CHECK constraints of tables, with the columns they read.
pub(super) const CHECKS_SQL: &str = "SELECT conrelid, conkey::pg_catalog.text, \
       coninhcount OPERATOR(pg_catalog.>) 0, connoinherit \
  FROM pg_catalog.pg_constraint \
 WHERE contype OPERATOR(pg_catalog.=) 'c'::pg_catalog.\"char\" \
   AND conrelid OPERATOR(pg_catalog.<>) 0::pg_catalog.oid";
pub(super) const FUNCTIONS_SQL: &str =
    "SELECT n.nspname, p.proname, p.provolatile, p.prokind, p.oid \
  FROM pg_catalog.pg_proc p \
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace";
/// The `USING` expressions of the policies that filter the session's
/// reads: `SELECT` and `ALL` policies for PUBLIC or a role whose
/// privileges the session's role has, on relations whose row-level
/// security is active for it (enabled, and the role neither owns the
/// relation, unless it is forced, nor bypasses row-level security).
pub(super) const POLICIES_SQL: &str =
    "SELECT p.polrelid, p.polname::pg_catalog.text, p.polqual::pg_catalog.text \
  FROM pg_catalog.pg_policy p \
 WHERE p.polcmd OPERATOR(pg_catalog.=) ANY ('{r,*}'::pg_catalog.\"char\"[]) \
   AND pg_catalog.row_security_active(p.polrelid) \
   AND (0::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (p.polroles) \
        OR EXISTS (SELECT FROM pg_catalog.unnest(p.polroles) AS r(oid) \
                    WHERE pg_catalog.pg_has_role(r.oid, 'USAGE')))";
pub(super) const OPERATORS_SQL: &str =
    "SELECT n.nspname, o.oprname, fn.nspname, f.proname, f.provolatile \
  FROM pg_catalog.pg_operator o \
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) o.oprnamespace \
  JOIN pg_catalog.pg_proc f ON f.oid OPERATOR(pg_catalog.=) o.oprcode \
  JOIN pg_catalog.pg_namespace fn ON fn.oid OPERATOR(pg_catalog.=) f.pronamespace";
/// Types, and whether only a superuser may change them or attach a cast
/// to them: those of `pg_catalog` and `information_schema`, and those a
/// superuser owns. That is not yet trust: what a type is made of and
/// the functions it runs are [`TYPE_EDGES_SQL`]'s (`super::types`).
pub(super) const TYPES_SQL: &str = "SELECT n.nspname, t.typname, t.oid, \
       n.nspname OPERATOR(pg_catalog.=) ANY ('{pg_catalog,information_schema}'::pg_catalog.name[]) \
       OR COALESCE(r.rolsuper, false) \
  FROM pg_catalog.pg_type t \
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) t.typnamespace \
  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) t.typowner";
/// What each type is made of and the code it may run, as rows (type,
/// kind, target, trusted): kind `t`, a type it is built on (a domain's
/// base type, an array's element type, a composite's attribute types, a
/// range's subtype, a multirange's range); kind `f`, a function it may
/// run (its input, output, receive, send, typmod, analyze and subscript
/// functions, a range's canonical and subtype-difference functions and
/// the support functions of its subtype's operator class, and every
/// function and operator's function that `pg_depend` records for its
/// domain `CHECK` constraints and default), trusted when `pg_catalog`
/// holds it and a superuser owns it; kind `x`, something that cannot be
/// followed (a domain constraint of another kind, a dependency on an
/// object of another catalog), never trusted.
pub(super) const TYPE_EDGES_SQL: &str = "SELECT e.typ, e.kind, e.target, \
       COALESCE(pn.nspname OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.name AND r.rolsuper, false) \
  FROM (SELECT t.oid, 't'::pg_catalog.text, t.typbasetype FROM pg_catalog.pg_type t \
         WHERE t.typbasetype OPERATOR(pg_catalog.<>) 0::pg_catalog.oid \
        UNION ALL \
        SELECT t.oid, 't', t.typelem FROM pg_catalog.pg_type t \
         WHERE t.typelem OPERATOR(pg_catalog.<>) 0::pg_catalog.oid \
        UNION ALL \
        SELECT t.oid, 't', a.atttypid FROM pg_catalog.pg_type t \
          JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) t.typrelid \
         WHERE t.typrelid OPERATOR(pg_catalog.<>) 0::pg_catalog.oid \
           AND a.attnum OPERATOR(pg_catalog.>) 0::pg_catalog.int2 AND NOT a.attisdropped \
        UNION ALL \
        SELECT g.rngtypid, 't', g.rngsubtype FROM pg_catalog.pg_range g \
        UNION ALL \
        SELECT g.rngmultitypid, 't', g.rngtypid FROM pg_catalog.pg_range g \
        UNION ALL \
        SELECT t.oid, 'f', f.oid FROM pg_catalog.pg_type t, \
               pg_catalog.unnest(ARRAY[t.typinput::pg_catalog.oid, t.typoutput::pg_catalog.oid, \
                 t.typreceive::pg_catalog.oid, t.typsend::pg_catalog.oid, \
                 t.typmodin::pg_catalog.oid, t.typmodout::pg_catalog.oid, \
                 t.typanalyze::pg_catalog.oid, t.typsubscript::pg_catalog.oid]) AS f(oid) \
         WHERE f.oid OPERATOR(pg_catalog.<>) 0::pg_catalog.oid \
        UNION ALL \
        SELECT g.rngtypid, 'f', f.oid FROM pg_catalog.pg_range g, \
               pg_catalog.unnest(ARRAY[g.rngcanonical::pg_catalog.oid, \
                 g.rngsubdiff::pg_catalog.oid]) AS f(oid) \
         WHERE f.oid OPERATOR(pg_catalog.<>) 0::pg_catalog.oid \
        UNION ALL \
        SELECT g.rngtypid, 'f', ap.amproc::pg_catalog.oid FROM pg_catalog.pg_range g \
          JOIN pg_catalog.pg_opclass oc ON oc.oid OPERATOR(pg_catalog.=) g.rngsubopc \
          JOIN pg_catalog.pg_amproc ap ON ap.amprocfamily OPERATOR(pg_catalog.=) oc.opcfamily \
        UNION ALL \
        SELECT c.contypid, 'x', 0::pg_catalog.oid FROM pg_catalog.pg_constraint c \
         WHERE c.contypid OPERATOR(pg_catalog.<>) 0::pg_catalog.oid \
           AND c.contype OPERATOR(pg_catalog.<>) ALL ('{c,n}'::pg_catalog.\"char\"[]) \
        UNION ALL \
        SELECT s.typ, \
               CASE WHEN d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid \
                      OR d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_operator'::pg_catalog.regclass::pg_catalog.oid \
                    THEN 'f' \
                    WHEN d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass::pg_catalog.oid \
                    THEN 't' \
                    WHEN d.refclassid OPERATOR(pg_catalog.=) ANY (ARRAY[ \
                           'pg_catalog.pg_namespace'::pg_catalog.regclass::pg_catalog.oid, \
                           'pg_catalog.pg_collation'::pg_catalog.regclass::pg_catalog.oid, \
                           'pg_catalog.pg_extension'::pg_catalog.regclass::pg_catalog.oid]) \
                      OR (s.own AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid) \
                    THEN 'n' \
                    ELSE 'x' END, \
               COALESCE(o.oprcode::pg_catalog.oid, d.refobjid) \
          FROM (SELECT c.contypid, 'pg_catalog.pg_constraint'::pg_catalog.regclass::pg_catalog.oid, c.oid, false \
                  FROM pg_catalog.pg_constraint c \
                 WHERE c.contypid OPERATOR(pg_catalog.<>) 0::pg_catalog.oid \
                UNION ALL \
                SELECT t.oid, 'pg_catalog.pg_type'::pg_catalog.regclass::pg_catalog.oid, t.oid, true \
                  FROM pg_catalog.pg_type t) AS s(typ, classid, objid, own) \
          JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) s.classid \
           AND d.objid OPERATOR(pg_catalog.=) s.objid \
          LEFT JOIN pg_catalog.pg_operator o \
            ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_operator'::pg_catalog.regclass::pg_catalog.oid \
           AND o.oid OPERATOR(pg_catalog.=) d.refobjid \
       ) AS e(typ, kind, target) \
  LEFT JOIN pg_catalog.pg_proc p ON e.kind OPERATOR(pg_catalog.=) 'f'::pg_catalog.text \
   AND p.oid OPERATOR(pg_catalog.=) e.target \
  LEFT JOIN pg_catalog.pg_namespace pn ON pn.oid OPERATOR(pg_catalog.=) p.pronamespace \
  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) p.proowner \
 WHERE e.kind OPERATOR(pg_catalog.<>) 'n'::pg_catalog.text";
/// The session's role, and its `temp_file_limit` (`Policy::spill_limit`).
pub(super) const SESSION_SQL: &str =
    "SELECT CURRENT_USER::pg_catalog.text, pg_catalog.current_setting('temp_file_limit')";
/// The schemas the server searches, as it resolved them: names folded or
/// quoted as in the setting, `$user` replaced, schemas that do not exist
/// or that the role may not use left out (the setting's text would need
/// all of PostgreSQL's rules to read the same way).
pub(super) const SCHEMAS_SQL: &str =
    "SELECT s::pg_catalog.text FROM pg_catalog.unnest(pg_catalog.current_schemas(false)) AS s";
/// The dptext extension's column labels, the rules of `dptext.rules`,
/// read where the extension stores them (`dptext.rules` is a view, and a
/// role that may create a schema `dptext` where the extension is not
/// installed could make one that runs its own functions). Labels of
/// provider `dptext` exist only where the extension's label provider is
/// loaded, which validates them.
pub(super) const DB_RULES_SQL: &str = "SELECT n.nspname::pg_catalog.text, c.relname::pg_catalog.text, \
       a.attname::pg_catalog.text, l.label \
  FROM pg_catalog.pg_seclabel l \
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) l.objoid \
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid \
   AND a.attnum OPERATOR(pg_catalog.=) l.objsubid \
 WHERE l.provider OPERATOR(pg_catalog.=) 'dptext'::pg_catalog.text \
   AND l.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid \
   AND l.objsubid OPERATOR(pg_catalog.>) 0 \
   AND NOT a.attisdropped";
/// Indexes of relations, with the columns PostgreSQL records their
/// expressions and predicates depend on (`pg_depend`, every column one
/// reads but through a whole-row reference; the key and `INCLUDE`
/// columns too), and whether the index makes its key a total order of
/// the table's rows: unique, valid and immediate, no expressions, no
/// predicate, every key column `NOT NULL`, with a default btree operator
/// class of its type (or of one it is binary-coercible to) and its own
/// collation, so that `ORDER BY` those columns compares as the index does.
pub(super) const INDEXES_SQL: &str = "SELECT i.indrelid, n.nspname, c.relname, \
       i.indkey::pg_catalog.text, i.indnkeyatts, \
       i.indexprs::pg_catalog.text, i.indpred::pg_catalog.text, \
       ARRAY(SELECT d.refobjsubid FROM pg_catalog.pg_depend d \
              WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid \
                AND d.objid OPERATOR(pg_catalog.=) i.indexrelid \
                AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid \
                AND d.refobjid OPERATOR(pg_catalog.=) i.indrelid \
                AND d.refobjsubid OPERATOR(pg_catalog.>) 0)::pg_catalog.text, \
       (i.indisunique AND i.indisvalid AND i.indimmediate \
        AND i.indexprs IS NULL AND i.indpred IS NULL \
        AND NOT EXISTS (SELECT FROM pg_catalog.generate_series(0, i.indnkeyatts OPERATOR(pg_catalog.-) 1) k \
          LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) i.indrelid \
            AND a.attnum OPERATOR(pg_catalog.=) i.indkey[k] \
          LEFT JOIN pg_catalog.pg_opclass o ON o.oid OPERATOR(pg_catalog.=) i.indclass[k] \
          WHERE a.attnum IS NULL OR NOT a.attnotnull OR o.oid IS NULL OR NOT o.opcdefault \
            OR o.opcmethod OPERATOR(pg_catalog.<>) 403::pg_catalog.oid \
            OR i.indcollation[k] OPERATOR(pg_catalog.<>) a.attcollation \
            OR (o.opcintype OPERATOR(pg_catalog.<>) a.atttypid AND NOT EXISTS ( \
              SELECT FROM pg_catalog.pg_cast ct \
              WHERE ct.castsource OPERATOR(pg_catalog.=) a.atttypid \
                AND ct.casttarget OPERATOR(pg_catalog.=) o.opcintype \
                AND ct.castmethod OPERATOR(pg_catalog.=) 'b'::pg_catalog.char))))::pg_catalog.text \
  FROM pg_catalog.pg_index i \
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid \
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace";
/// Generated columns, with their expressions' node trees and the columns
/// of their table PostgreSQL records they depend on.
pub(super) const GENERATED_SQL: &str = "SELECT a.attrelid, a.attname::pg_catalog.text, \
       d.adbin::pg_catalog.text, \
       ARRAY(SELECT p.refobjsubid FROM pg_catalog.pg_depend p \
              WHERE p.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass::pg_catalog.oid \
                AND p.objid OPERATOR(pg_catalog.=) d.oid \
                AND p.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid \
                AND p.refobjid OPERATOR(pg_catalog.=) a.attrelid \
                AND p.refobjsubid OPERATOR(pg_catalog.>) 0)::pg_catalog.text \
  FROM pg_catalog.pg_attribute a \
  JOIN pg_catalog.pg_attrdef d ON d.adrelid OPERATOR(pg_catalog.=) a.attrelid \
   AND d.adnum OPERATOR(pg_catalog.=) a.attnum \
 WHERE a.attgenerated OPERATOR(pg_catalog.<>) ''::pg_catalog.char AND NOT a.attisdropped";
/// The names of every role (`dptext-proxy check` looks for the trusted
/// owners among them).
pub(super) const ROLES_SQL: &str = "SELECT rolname::pg_catalog.text FROM pg_catalog.pg_roles";

#[cfg(test)]
mod tests {
    use super::*;

    /// Characters that make up PostgreSQL operators.
    const OPERATOR_CHARS: &str = "+-*/<>=~!@#%^&|`?";

    /// Key words that compare with an `=` (or another operator) looked up by
    /// name: `IN`, `LIKE`, `BETWEEN`, `IS DISTINCT FROM`, `NULLIF`...
    const OPERATOR_WORDS: &[&str] = &[
        "IN", "LIKE", "ILIKE", "SIMILAR", "BETWEEN", "DISTINCT", "NULLIF", "OVERLAPS",
    ];

    /// What in `sql` names an operator without `OPERATOR(pg_catalog.x)`:
    /// operator characters outside string literals, casts (`::`) and
    /// qualified operators, and key words that compare with one. Empty when
    /// every operator is pinned to `pg_catalog`.
    fn unqualified(sql: &str) -> Vec<String> {
        // String literals first: their text is data.
        let mut bare = String::with_capacity(sql.len());
        let mut in_literal = false;
        for c in sql.chars() {
            if c == '\'' {
                in_literal = !in_literal;
                bare.push(' ');
            } else if !in_literal {
                bare.push(c);
            }
        }
        let mut found = Vec::new();
        let mut rest = bare.replace("::", " ");
        while let Some(at) = rest.find("OPERATOR(pg_catalog.") {
            let tail = &rest[at..];
            let end = tail.find(')').map_or(tail.len(), |e| e + 1);
            rest.replace_range(at..at + end, " ");
        }
        found.extend(
            rest.split(|c: char| !OPERATOR_CHARS.contains(c))
                .filter(|op| !op.is_empty())
                .map(str::to_owned),
        );
        found.extend(
            rest.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .filter(|w| OPERATOR_WORDS.iter().any(|k| w.eq_ignore_ascii_case(k)))
                .map(str::to_owned),
        );
        found
    }

    #[test]
    fn unqualified_operators_are_found() {
        assert_eq!(unqualified("SELECT a FROM t WHERE x <> 0"), ["<>"]);
        assert_eq!(unqualified("SELECT a FROM t WHERE k IN ('r', 'p')"), ["IN"]);
        assert_eq!(unqualified("SELECT a FROM t WHERE x = ANY (y)"), ["="]);
        assert!(unqualified(
            "SELECT a::pg_catalog.text FROM t \
             WHERE x OPERATOR(pg_catalog.<>) 0 AND k OPERATOR(pg_catalog.=) ANY ('{r,*}')"
        )
        .is_empty());
        // Words that only contain a key word are not one.
        assert!(unqualified("SELECT indkey, inhrelid FROM pg_index").is_empty());
    }

    #[test]
    fn no_catalog_read_names_an_operator_without_pg_catalog() {
        for sql in [
            RELATIONS_SQL,
            COLUMNS_SQL,
            INHERITS_SQL,
            PARTITION_KEYS_SQL,
            CHECKS_SQL,
            FUNCTIONS_SQL,
            POLICIES_SQL,
            OPERATORS_SQL,
            TYPES_SQL,
            TYPE_EDGES_SQL,
            SESSION_SQL,
            SCHEMAS_SQL,
            DB_RULES_SQL,
            INDEXES_SQL,
            GENERATED_SQL,
            ROLES_SQL,
        ] {
            let found = unqualified(sql);
            assert!(found.is_empty(), "{found:?} in {sql}");
        }
    }
}
