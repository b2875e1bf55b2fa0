//! `auth_cmd`: where the command line keeps OAuth tokens, and `mcp auth login|status|logout`.
//!
//! By default tokens go to the file store of the host library ([`FileTokenStore`]:
//! `$XDG_DATA_HOME/verifi-mcp/tokens.json`, else `~/.local/share/verifi-mcp/tokens.json`;
//! `~/Library/Application Support/verifi-mcp/` on macOS, `%APPDATA%\verifi-mcp\` on Windows),
//! so a login is made once: a later run against the same server uses the stored token, or its
//! refresh token, without a browser, and without the OAuth flags (the client a login used is
//! kept with it). `--token-store memory` (or `MCP_TOKEN_STORE=memory`) keeps tokens for the
//! run only; `--token-store PATH` uses another file.
//!
//! Owns: choosing the store, matching stored logins to an ENDPOINT, the `auth` commands'
//! output (never a token). Does not own: the flow (the host library's `auth`).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use verifi_mcp_host::FileTokenStore;
use verifi_mcp_host::auth::decide::check_resource;
use verifi_mcp_host::auth::store::StoredLogin;

use crate::common::{UsageError, endpoint_base, mcp_url};

/// The variable `--token-store` is also read from.
pub const STORE_VAR: &str = "MCP_TOKEN_STORE";

/// Where tokens are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// In memory, for the run.
    Memory,
    /// In this file.
    File(PathBuf),
    /// The default file, but the platform names no data directory (no HOME): in memory.
    NoDataDir,
}

/// `--token-store` (or [`STORE_VAR`]): `file` (default), `memory`, or a file's path.
pub fn choose(flag: Option<&str>) -> StoreChoice {
    match flag.map(str::trim) {
        None | Some("" | "file") => match FileTokenStore::default_path() {
            Some(p) => StoreChoice::File(p),
            None => StoreChoice::NoDataDir,
        },
        Some("memory") => StoreChoice::Memory,
        Some(path) => StoreChoice::File(PathBuf::from(path)),
    }
}

static IN_USE: OnceLock<Arc<FileTokenStore>> = OnceLock::new();

/// The file store of `choice` (one per process), if it is a file.
pub fn store(choice: &StoreChoice) -> Option<Arc<FileTokenStore>> {
    let StoreChoice::File(path) = choice else {
        return None;
    };
    let s = IN_USE.get_or_init(|| Arc::new(FileTokenStore::new(path)));
    (s.path() == path).then(|| s.clone())
}

/// The stored logins whose resource is the MCP server at `mcp_url` (its resource, as its
/// metadata published it, is that URL or a parent of it).
pub fn logins_for(store: &FileTokenStore, mcp_url: &str) -> Vec<StoredLogin> {
    store
        .logins()
        .into_iter()
        .filter(|l| check_resource(&l.resource, mcp_url).is_ok())
        .collect()
}

/// Says on `err` why the token store could not be read or written, if it could not.
pub fn report_error(err: &dyn Fn(&str)) {
    if let Some(e) = IN_USE.get().and_then(|s| s.take_error()) {
        err(&format!("mcp: token store: {e}"));
    }
}

/// The MCP URL of `auth status|logout [ENDPOINT]` (or `MCP_ENDPOINT`), if one is given.
pub fn target_url(pos: &[String], exact: bool) -> Result<Option<String>, UsageError> {
    let given = match pos {
        [] => std::env::var("MCP_ENDPOINT")
            .ok()
            .filter(|v| !v.trim().is_empty()),
        [one] => Some(one.clone()),
        [_, x, ..] => return Err(UsageError(format!("unexpected argument {x:?}"))),
    };
    match given {
        None => Ok(None),
        Some(u) => {
            let u = u.trim();
            endpoint_base(u, exact)?;
            Ok(Some(mcp_url(u, exact)?))
        }
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `in 59 min`, `expired 3 min ago`, `no stated expiry`.
pub fn expiry_words(expires_at: Option<u64>, now: u64) -> String {
    let span = |s: u64| match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h", s / 3600),
        _ => format!("{} days", s / 86_400),
    };
    match expires_at {
        None => "no stated expiry".into(),
        Some(at) if at > now => format!("expires in {}", span(at - now)),
        Some(at) => format!("expired {} ago", span(now - at)),
    }
}

/// A login as JSON (never a token).
pub fn login_json(l: &StoredLogin, now: u64) -> Value {
    json!({
        "resource": l.resource,
        "issuer": l.issuer,
        "expiresAt": l.expires_at,
        "expired": l.expires_at.is_some_and(|at| at <= now),
        "refreshToken": l.has_refresh,
        "scopes": l.scopes,
        "savedAt": l.saved_at,
    })
}

/// A login as one line for a person (never a token).
pub fn login_line(l: &StoredLogin, now: u64) -> String {
    let mut s = format!(
        "{}  (authorization server {}): {}",
        l.resource,
        l.issuer,
        expiry_words(l.expires_at, now)
    );
    if l.has_refresh {
        s.push_str(", renewable (refresh token held)");
    }
    if !l.scopes.is_empty() {
        s.push_str(&format!(", scopes {}", l.scopes.join(" ")));
    }
    s
}

fn where_kept(choice: &StoreChoice) -> String {
    match choice {
        StoreChoice::File(p) => p.display().to_string(),
        StoreChoice::Memory => "memory (--token-store memory: nothing is kept)".into(),
        StoreChoice::NoDataDir => {
            "memory (no data directory: HOME is not set; give --token-store PATH)".into()
        }
    }
}

/// `mcp auth status [ENDPOINT]`: the stored logins (of ENDPOINT, or all), as JSON lines when
/// `json`, else one line each. 0 when there is one; 1 when ENDPOINT has none.
pub fn status(
    choice: &StoreChoice,
    url: Option<&str>,
    json: bool,
    out: &dyn Fn(&str),
    err: &dyn Fn(&str),
) -> u8 {
    let Some(store) = store(choice) else {
        err(&format!("mcp: tokens are kept in {}", where_kept(choice)));
        return u8::from(url.is_some());
    };
    let logins = match url {
        Some(u) => logins_for(&store, u),
        None => store.logins(),
    };
    report_error(err);
    let now = now();
    for l in &logins {
        match json {
            true => out(&login_json(l, now).to_string()),
            false => out(&login_line(l, now)),
        }
    }
    match (url, logins.is_empty()) {
        (Some(u), true) => {
            err(&format!(
                "mcp: not logged in to {u} (tokens in {}); log in with: mcp auth login {u}",
                where_kept(choice)
            ));
            1
        }
        (None, true) => {
            err(&format!("mcp: no stored logins in {}", where_kept(choice)));
            0
        }
        _ => 0,
    }
}

/// `mcp auth logout ENDPOINT`: forgets its stored tokens. 0 when one was forgotten.
pub fn logout(choice: &StoreChoice, url: &str, out: &dyn Fn(&str), err: &dyn Fn(&str)) -> u8 {
    let Some(store) = store(choice) else {
        err(&format!(
            "mcp: tokens are kept in {}: nothing to log out of",
            where_kept(choice)
        ));
        return 1;
    };
    match store.remove_where(&|l| check_resource(&l.resource, url).is_ok()) {
        Ok(0) => {
            report_error(err);
            err(&format!("mcp: not logged in to {url}"));
            1
        }
        Ok(n) => {
            out(&format!(
                "logged out of {url} ({n} token{} forgotten)",
                if n == 1 { "" } else { "s" }
            ));
            0
        }
        Err(e) => {
            err(&format!("mcp: token store: {e}"));
            1
        }
    }
}

/// After `mcp auth login`'s authorized ping: what was stored, or why not. 0 when logged in.
pub fn after_login(
    result: Result<(), String>,
    choice: &StoreChoice,
    url: &str,
    out: &dyn Fn(&str),
    err: &dyn Fn(&str),
) -> u8 {
    if let Err(e) = result {
        err(&format!("mcp: login to {url} failed: {e}"));
        return 1;
    }
    let Some(store) = store(choice) else {
        out(&format!("authorized {url}"));
        err(&format!(
            "mcp: the token is kept in {}: the next run logs in again",
            where_kept(choice)
        ));
        return 0;
    };
    report_error(err);
    let now = now();
    match logins_for(&store, url).first() {
        Some(l) => {
            out(&format!("logged in to {}", login_line(l, now)));
            err(&format!("mcp: token kept in {}", where_kept(choice)));
            0
        }
        None => {
            err(&format!(
                "mcp: {url} answered, but no token was stored in {} (does it use OAuth?)",
                where_kept(choice)
            ));
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_reads_as_words_and_status_never_shows_a_token() {
        assert_eq!(expiry_words(None, 100), "no stated expiry");
        assert_eq!(expiry_words(Some(130), 100), "expires in 30 s");
        assert_eq!(expiry_words(Some(100 + 3600), 100), "expires in 60 min");
        assert_eq!(expiry_words(Some(40), 100), "expired 60 s ago");
        let l = StoredLogin {
            issuer: "http://as".into(),
            resource: "http://mcp/mcp".into(),
            expires_at: Some(50),
            has_refresh: true,
            scopes: vec!["mcp:tools".into()],
            saved_at: 1,
        };
        let j = login_json(&l, 100);
        assert_eq!(j["expired"], true);
        assert_eq!(j["refreshToken"], true);
        assert!(login_line(&l, 100).contains("renewable"));
        assert_eq!(choose(Some("memory")), StoreChoice::Memory);
        assert_eq!(
            choose(Some("/tmp/t.json")),
            StoreChoice::File(PathBuf::from("/tmp/t.json"))
        );
    }
}
