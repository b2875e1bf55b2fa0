//! `child_env`: the environment the command line adds for a `--stdio` server (or a config
//! file's `command` server): `-e/--env NAME=VALUE` and `--env-pass NAME`, on top of the
//! allow-list the host library always passes (PATH, HOME, LANG …). Nothing else of `mcp`'s
//! environment reaches the server.

use serde_json::{Map, Value};

use crate::common::UsageError;

/// Checks a variable's name: not empty, no `=`, no NUL.
fn check_name(name: &str, flag: &str) -> Result<(), UsageError> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(UsageError(format!(
            "{flag}: {name:?} is not a variable name"
        )));
    }
    Ok(())
}

/// The variables of `-e NAME=VALUE` (the last of a name wins) and `--env-pass NAME` (taken
/// from `lookup`, our environment; an unset one is an error, so a typo is not silent), as
/// the manifest's `env` object. `-e` wins over `--env-pass` for the same name.
pub fn child_env(
    set: &[String],
    pass: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Map<String, Value>, UsageError> {
    let mut env = Map::new();
    for name in pass {
        check_name(name, "--env-pass")?;
        let value = lookup(name).ok_or_else(|| {
            UsageError(format!(
                "--env-pass {name}: {name} is not set in this environment"
            ))
        })?;
        env.insert(name.clone(), Value::String(value));
    }
    for pair in set {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(UsageError(format!(
                "--env {pair:?}: write it as NAME=VALUE (or --env-pass NAME to pass ours)"
            )));
        };
        check_name(name, "--env")?;
        if value.contains('\0') {
            return Err(UsageError(format!(
                "--env {name}: the value holds a NUL byte"
            )));
        }
        env.insert(name.to_owned(), Value::String(value.to_owned()));
    }
    Ok(env)
}

/// Adds `env` to a stdio server's manifest entry (`{"command": …}`), over what the entry
/// already sets (a config file's `env`).
pub fn add_to_fill(fill: &mut Map<String, Value>, env: &Map<String, Value>) {
    if env.is_empty() {
        return;
    }
    let slot = fill
        .entry("env")
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    if let Value::Object(m) = slot {
        for (k, v) in env {
            m.insert(k.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_passed_names_make_the_env_and_mistakes_are_named() {
        let ours = |k: &str| (k == "HOME_DB").then(|| "/srv/db".to_owned());
        let env = child_env(
            &["A=1".into(), "B=x=y".into(), "A=2".into(), "E=".into()],
            &["HOME_DB".into()],
            &ours,
        )
        .unwrap();
        assert_eq!(env["A"], "2");
        assert_eq!(env["B"], "x=y");
        assert_eq!(env["E"], "");
        assert_eq!(env["HOME_DB"], "/srv/db");
        let e = child_env(&["NOVALUE".into()], &[], &ours).unwrap_err();
        assert!(e.0.contains("NAME=VALUE"), "{e}");
        let e = child_env(&["=v".into()], &[], &ours).unwrap_err();
        assert!(e.0.contains("not a variable name"), "{e}");
        let e = child_env(&[], &["MISSING".into()], &ours).unwrap_err();
        assert!(e.0.contains("MISSING is not set"), "{e}");
        let mut fill = Map::new();
        fill.insert("env".into(), serde_json::json!({"A": "file", "C": "3"}));
        add_to_fill(&mut fill, &env);
        assert_eq!(fill["env"]["A"], "2");
        assert_eq!(fill["env"]["C"], "3");
    }
}
