//! Which types a proxy-mode session trusts: those no role but a superuser
//! can make run code. A value of any other type may only be output bare
//! (`RelationInfo::opaque`), and a `Parse` may not name it as a
//! parameter's type: a cast, a domain `CHECK` or an input function of
//! another role's would run that role's code with the session's raw
//! reads.
//!
//! A type is trusted when its whole closure is: it lives in `pg_catalog`
//! or `information_schema` or a superuser owns it, every type it is built
//! on is trusted (a domain's base type, an array's element type, a
//! composite's attribute types, a range's subtype, a multirange's range),
//! and every function it may run (its I/O, typmod, analyze and subscript
//! functions, a range's, those its domain `CHECK` constraints and default
//! call) is a `pg_catalog` function a superuser owns. Owning a type is not
//! enough: a superuser's domain over another role's domain runs the
//! `CHECK` that role adds to it later.

use std::collections::{HashMap, HashSet};

/// What a type is made of or may run (a row of
/// `super::queries::TYPE_EDGES_SQL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Edge {
    /// A type it is built on or its constraints name, by OID.
    Type(u32),
    /// A function it may run: whether `pg_catalog` holds it and a
    /// superuser owns it.
    Function(bool),
    /// Something that could not be followed: never trusted.
    Unfollowed,
}

impl Edge {
    /// The edge of a row's kind (`t`, `f`, `x`), target and function
    /// trust; `None` for a kind not known (taken as [`Edge::Unfollowed`]
    /// by the caller).
    pub(super) fn of(kind: &str, target: u32, trusted: bool) -> Option<Edge> {
        match kind {
            "t" => Some(Edge::Type(target)),
            "f" => Some(Edge::Function(trusted)),
            "x" => Some(Edge::Unfollowed),
            _ => None,
        }
    }
}

/// The types of `candidates` (whose own schema or owner is trusted)
/// whose whole closure through `edges` (type, what it is made of or may
/// run) is trusted: the greatest set in which every type's edges lead to
/// trusted functions and to types of the set. A type an edge names that
/// is not a candidate (another role's, or one the catalog read did not
/// return) is not trusted.
pub(super) fn trusted(candidates: &HashSet<u32>, edges: &[(u32, Edge)]) -> HashSet<u32> {
    let mut trusted = candidates.clone();
    // Who is built on each type, to take trust from when it goes.
    let mut dependents: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut gone: Vec<u32> = Vec::new();
    for &(typ, edge) in edges {
        match edge {
            Edge::Type(target) => {
                if !candidates.contains(&target) {
                    gone.push(typ);
                }
                dependents.entry(target).or_default().push(typ);
            }
            Edge::Function(true) => {}
            Edge::Function(false) | Edge::Unfollowed => gone.push(typ),
        }
    }
    while let Some(typ) = gone.pop() {
        if trusted.remove(&typ) {
            if let Some(ds) = dependents.get(&typ) {
                gone.extend(ds.iter().copied());
            }
        }
    }
    trusted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(oids: &[u32]) -> HashSet<u32> {
        oids.iter().copied().collect()
    }

    #[test]
    fn a_type_of_trusted_parts_and_functions_is_trusted() {
        // 25 text; 100 a superuser's domain over it, whose CHECK calls a
        // pg_catalog function and which names itself; 101 its array.
        let edges = [
            (100, Edge::Type(25)),
            (100, Edge::Function(true)),
            (100, Edge::Type(100)),
            (101, Edge::Type(100)),
        ];
        assert_eq!(trusted(&set(&[25, 100, 101]), &edges), set(&[25, 100, 101]));
    }

    #[test]
    fn trust_goes_through_every_layer() {
        // 200 another role's domain (not a candidate); 201 a superuser's
        // domain over it; 202 a superuser's composite with a 201
        // attribute; 203 the composite's array; 204 a range over 201,
        // 205 its multirange; 206 unrelated.
        let edges = [
            (201, Edge::Type(200)),
            (202, Edge::Type(23)),
            (202, Edge::Type(201)),
            (203, Edge::Type(202)),
            (204, Edge::Type(201)),
            (205, Edge::Type(204)),
            (206, Edge::Type(23)),
        ];
        let got = trusted(&set(&[23, 201, 202, 203, 204, 205, 206]), &edges);
        assert_eq!(got, set(&[23, 206]));
    }

    #[test]
    fn another_roles_function_or_an_unfollowed_edge_takes_trust() {
        // 300 a superuser's domain whose CHECK calls another role's
        // function; 301 one with a constraint that could not be followed;
        // 302 a domain over 300; 303 names a type the read did not return.
        let edges = [
            (300, Edge::Function(true)),
            (300, Edge::Function(false)),
            (301, Edge::Unfollowed),
            (302, Edge::Type(300)),
            (303, Edge::Type(999)),
        ];
        assert!(trusted(&set(&[300, 301, 302, 303]), &edges).is_empty());
    }

    #[test]
    fn cycles_of_trusted_types_stay_trusted() {
        // A composite whose attribute is an array of itself.
        let edges = [(400, Edge::Type(401)), (401, Edge::Type(400))];
        assert_eq!(trusted(&set(&[400, 401]), &edges), set(&[400, 401]));
        let edges = [
            (400, Edge::Type(401)),
            (401, Edge::Type(400)),
            (401, Edge::Function(false)),
        ];
        assert!(trusted(&set(&[400, 401]), &edges).is_empty());
    }

    #[test]
    fn kinds_are_read() {
        assert_eq!(Edge::of("t", 5, false), Some(Edge::Type(5)));
        assert_eq!(Edge::of("f", 5, true), Some(Edge::Function(true)));
        assert_eq!(Edge::of("x", 0, false), Some(Edge::Unfollowed));
        assert_eq!(Edge::of("?", 0, true), None);
    }
}
