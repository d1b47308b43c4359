//! `--field NAME[=MECHANISM[:KEY=VALUE,...]]`: which JSON fields or CSV
//! columns to sanitize, each with its own mechanism or the global one.

use anyhow::{bail, Context, Result};
use dptext_core::mechanisms::MechanismSpec;

/// One `--field` as the user wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldArg {
    /// The JSON key or CSV column.
    pub name: String,
    /// Its own mechanism and parameters; `None` uses `--mechanism` and the
    /// global parameter flags.
    pub own: Option<(String, serde_json::Value)>,
}

impl std::str::FromStr for FieldArg {
    type Err = String;

    /// Parses `note`, `note=deidentify` or `note=santext_plus:eps=3,p=0.2`.
    /// The first `=` ends the name; values are JSON where they parse as JSON
    /// (numbers, booleans, quoted strings), plain strings otherwise.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (name, rest) = match s.split_once('=') {
            Some((n, r)) => (n, Some(r)),
            None => (s, None),
        };
        if name.is_empty() {
            return Err(format!("{s:?}: the field name is empty"));
        }
        let Some(rest) = rest else {
            return Ok(FieldArg {
                name: name.to_string(),
                own: None,
            });
        };
        // `deidentify THEN santext_plus:eps=3`: a chain of stages.
        let stages: Vec<&str> = split_then(rest);
        if stages.len() > 1 {
            let mut list = Vec::new();
            for st in stages {
                let (m, p) = stage(s, name, st)?;
                list.push(serde_json::json!({"mechanism": m, "params": p}));
            }
            return Ok(FieldArg {
                name: name.to_string(),
                own: Some(("chain".to_string(), serde_json::json!({"stages": list}))),
            });
        }
        let (mechanism, obj) = stage(s, name, rest)?;
        Ok(FieldArg {
            name: name.to_string(),
            own: Some((mechanism, serde_json::Value::Object(obj))),
        })
    }
}

/// The stages of `a THEN b` (any case of THEN, spaces around it).
fn split_then(rest: &str) -> Vec<&str> {
    let lower = rest.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find(" then ") {
        out.push(rest[from..from + i].trim());
        from += i + 6;
    }
    out.push(rest[from..].trim());
    out
}

/// One `MECHANISM[:K=V,...]`.
fn stage(
    whole: &str,
    name: &str,
    rest: &str,
) -> std::result::Result<(String, serde_json::Map<String, serde_json::Value>), String> {
    let s = whole;
    let (mechanism, params) = match rest.split_once(':') {
        Some((m, p)) => (m, p),
        None => (rest, ""),
    };
    if mechanism.is_empty() {
        return Err(format!(
            "{s:?}: no mechanism after '=' (write {name}=santext:eps=3, or just {name})"
        ));
    }
    let mut obj = serde_json::Map::new();
    for pair in params.split(',').filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!(
                "{s:?}: parameter {pair:?} is not KEY=VALUE (e.g. eps=3)"
            ));
        };
        let value = serde_json::from_str(v).unwrap_or_else(|_| v.into());
        if obj.insert(k.to_string(), value).is_some() {
            return Err(format!("{s:?}: parameter {k:?} given twice"));
        }
    }
    Ok((mechanism.to_string(), obj))
}

/// A field with its validated mechanism.
#[derive(Debug, Clone)]
pub struct Field {
    /// The JSON key or CSV column.
    pub name: String,
    /// What to run on it.
    pub spec: MechanismSpec,
}

/// Resolves every `--field` to a spec: its own, or `global` (built on
/// first use, so that a run where every field names its own mechanism
/// never needs `--eps`). Refuses a name given twice, and global parameter
/// flags that no field would use.
pub fn resolve(
    args: &[FieldArg],
    global: impl FnOnce() -> Result<MechanismSpec>,
    global_flags_given: bool,
) -> Result<Vec<Field>> {
    for (i, a) in args.iter().enumerate() {
        if args[..i].iter().any(|b| b.name == a.name) {
            bail!("--field {:?} is given twice", a.name);
        }
    }
    if global_flags_given && args.iter().all(|a| a.own.is_some()) {
        bail!(
            "--mechanism and its parameter flags (--eps, --p, --w, --embedding, --params) apply to \
             bare --field NAME only, and every --field here names its own mechanism: \
             put the parameters in the field (e.g. --field note=santext:eps=3) or drop the flags"
        );
    }
    let mut global = Some(global);
    let mut global_spec: Option<MechanismSpec> = None;
    let mut fields = Vec::with_capacity(args.len());
    for a in args {
        let spec = match &a.own {
            Some((mechanism, params)) => parse_spec(mechanism, params, |param| {
                format!("--field {}={mechanism}:{param}=...", a.name)
            })
            .with_context(|| format!("--field {}", a.name))?,
            None => {
                if let Some(build) = global.take() {
                    global_spec = Some(build()?);
                }
                match &global_spec {
                    Some(s) => s.clone(),
                    None => bail!("the global mechanism could not be built"),
                }
            }
        };
        fields.push(Field {
            name: a.name.clone(),
            spec,
        });
    }
    Ok(fields)
}

/// [`MechanismSpec::parse`], with a missing required parameter reported as
/// the flag that sets it (`how(param)`), instead of serde's "missing field".
pub fn parse_spec(
    mechanism: &str,
    params: &serde_json::Value,
    how: impl Fn(&str) -> String,
) -> Result<MechanismSpec> {
    match MechanismSpec::parse(mechanism, params) {
        Ok(spec) => Ok(spec),
        Err(dptext_core::Error::InvalidParameter { reason, .. })
            if reason.starts_with("missing field `") =>
        {
            let param = reason
                .trim_start_matches("missing field `")
                .split('`')
                .next()
                .unwrap_or_default();
            let what = if param == "eps" {
                " (the privacy parameter, > 0; smaller is more private)"
            } else {
                ""
            };
            bail!("{mechanism} needs {param}{what}: add {}", how(param))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_arguments_parse() {
        let bare: FieldArg = "note".parse().unwrap();
        assert_eq!(bare.own, None);
        let own: FieldArg = "note=santext_plus:eps=3,p=0.2,embedding=glove"
            .parse()
            .unwrap();
        assert_eq!(own.name, "note");
        assert_eq!(
            own.own,
            Some((
                "santext_plus".to_string(),
                serde_json::json!({"eps": 3, "p": 0.2, "embedding": "glove"})
            ))
        );
        let plain: FieldArg = "patient=deidentify".parse().unwrap();
        assert_eq!(
            plain.own,
            Some(("deidentify".to_string(), serde_json::json!({})))
        );
        for bad in [
            "=santext",
            "note=",
            "note=santext:eps",
            "note=santext:eps=1,eps=2",
        ] {
            assert!(bad.parse::<FieldArg>().is_err(), "{bad}");
        }
    }
}
