//! `store`: tokens that outlive the process. [`FileTokenStore`] keeps them in one JSON file
//! in the platform's data directory ([`FileTokenStore::default_path`]), so a login is made
//! once and used by every later run.
//!
//! The file is created with mode `0600` (never readable by others, not even for a moment:
//! the mode is set when the file is created), in a `0700` directory, and replaced atomically
//! (a temporary file beside it, then a rename), so a reader never sees half a file and a crash
//! never leaves one. Each token is kept under the authorization server's issuer and the
//! resource it was issued for: a token is only ever handed back for the same pair, so a
//! resource whose authorization server changed never gets the old server's token (the MCP
//! authorization specification's audience binding). The client a login used (a
//! pre-registered id, or one registered dynamically, with its secret) is kept per issuer, so a
//! refresh token can be used by a later run.
//!
//! Owns: the file, its format and its mode. Does not own: when a token is used or renewed
//! (the [`super::Authorizer`]).

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::{StoredClient, Token, TokenStore, lock};

/// The largest token file read (a bigger one is refused, not read into memory).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// The directory under the platform's data directory, and the file in it.
const DIR: &str = "verifi-mcp";
const FILE: &str = "tokens.json";

/// What the file holds.
#[derive(Serialize, Deserialize, Default, Clone, Debug)]
struct Stored {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    tokens: Vec<Entry>,
    #[serde(default)]
    clients: Vec<ClientEntry>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct Entry {
    issuer: String,
    resource: String,
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_at: Option<u64>,
    #[serde(default)]
    scopes: Vec<String>,
    /// When it was written, in Unix seconds.
    #[serde(default)]
    saved_at: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct ClientEntry {
    issuer: String,
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
}

/// A stored login as `status` shows it: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLogin {
    /// The authorization server's issuer.
    pub issuer: String,
    /// The resource (the MCP server) the token is for.
    pub resource: String,
    /// When the access token expires, in Unix seconds (None: not stated).
    pub expires_at: Option<u64>,
    /// Whether a refresh token is held (a run renews the access token without a person).
    pub has_refresh: bool,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// When it was stored, in Unix seconds.
    pub saved_at: u64,
}

/// Tokens in a JSON file, mode `0600`, replaced atomically; see the module's description.
/// Reads are served from memory and read again only when the file changed (another run may
/// have renewed a token); every write reads the file first and changes only its own entry.
pub struct FileTokenStore {
    path: PathBuf,
    /// The file's contents as last read, and its modification time then.
    cache: Mutex<Option<(Stored, Option<SystemTime>)>>,
    /// The last failure to read or write the file (the trait's methods cannot return one).
    error: Mutex<Option<String>>,
}

impl std::fmt::Debug for FileTokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileTokenStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The platform's per-user data directory: `$XDG_DATA_HOME` (when absolute) or
/// `~/.local/share` on Linux and other Unix, `~/Library/Application Support` on macOS,
/// `%APPDATA%` on Windows. `var` reads the environment (a parameter, for tests).
pub fn data_dir(var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if cfg!(windows) {
        return set("APPDATA");
    }
    let home = set("HOME").filter(|h| h.is_absolute());
    if cfg!(target_os = "macos") {
        return home.map(|h| h.join("Library").join("Application Support"));
    }
    set("XDG_DATA_HOME")
        .filter(|d| d.is_absolute())
        .or_else(|| home.map(|h| h.join(".local").join("share")))
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

impl FileTokenStore {
    /// A store in the file at `path` (nothing is read or created until it is used).
    pub fn new(path: impl Into<PathBuf>) -> FileTokenStore {
        FileTokenStore {
            path: path.into(),
            cache: Mutex::new(None),
            error: Mutex::new(None),
        }
    }

    /// `verifi-mcp/tokens.json` in [`data_dir`] of this process's environment.
    pub fn default_path() -> Option<PathBuf> {
        data_dir(&|k| std::env::var(k).ok()).map(|d| d.join(DIR).join(FILE))
    }

    /// A store at [`default_path`](Self::default_path), if the platform names one.
    pub fn open_default() -> Option<FileTokenStore> {
        Self::default_path().map(FileTokenStore::new)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last failure to read or write the file, taken (None: none since the last call).
    pub fn take_error(&self) -> Option<String> {
        lock(&self.error).take()
    }

    fn note(&self, e: String) {
        *lock(&self.error) = Some(e);
    }

    /// Every stored login (no token in it), in the file's order.
    pub fn logins(&self) -> Vec<StoredLogin> {
        self.with_current(|s| {
            s.tokens
                .iter()
                .map(|e| StoredLogin {
                    issuer: e.issuer.clone(),
                    resource: e.resource.clone(),
                    expires_at: e.expires_at,
                    has_refresh: e.refresh_token.is_some(),
                    scopes: e.scopes.clone(),
                    saved_at: e.saved_at,
                })
                .collect()
        })
        .unwrap_or_default()
    }

    /// Forgets every token whose resource `matches`, and returns how many were forgotten.
    pub fn remove_where(&self, matches: &dyn Fn(&StoredLogin) -> bool) -> Result<usize, String> {
        let mut n = 0;
        self.update(|s| {
            s.tokens.retain(|e| {
                let login = StoredLogin {
                    issuer: e.issuer.clone(),
                    resource: e.resource.clone(),
                    expires_at: e.expires_at,
                    has_refresh: e.refresh_token.is_some(),
                    scopes: Vec::new(),
                    saved_at: e.saved_at,
                };
                let gone = matches(&login);
                n += usize::from(gone);
                !gone
            });
            n > 0
        })?;
        Ok(n)
    }

    /// The file's modification time (None: no file).
    fn mtime(&self) -> Option<SystemTime> {
        fs::metadata(&self.path).and_then(|m| m.modified()).ok()
    }

    /// Reads the file: an absent file is an empty store; an unreadable, oversized or
    /// malformed one is an error (and is never overwritten).
    fn read(&self) -> Result<Stored, String> {
        let f = match fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Stored::default()),
            Err(e) => return Err(format!("cannot read {}: {e}", self.path.display())),
        };
        let mut bytes = Vec::new();
        f.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(format!(
                "{} is over {MAX_FILE_BYTES} bytes; not a token file",
                self.path.display()
            ));
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Stored::default());
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{} is not a token file ({e}); move it away to start afresh",
                self.path.display()
            )
        })
    }

    /// Runs `f` on the file's current contents (read again if it changed since).
    fn with_current<T>(&self, f: impl FnOnce(&Stored) -> T) -> Option<T> {
        let mut cache = lock(&self.cache);
        let now = self.mtime();
        let fresh = matches!(&*cache, Some((_, at)) if *at == now && now.is_some());
        if !fresh {
            match self.read() {
                Ok(s) => *cache = Some((s, now)),
                Err(e) => {
                    self.note(e);
                    *cache = None;
                    return None;
                }
            }
        }
        cache.as_ref().map(|(s, _)| f(s))
    }

    /// Reads the file, lets `change` edit it (true: something changed), and writes it back
    /// atomically.
    fn update(&self, change: impl FnOnce(&mut Stored) -> bool) -> Result<(), String> {
        let mut cache = lock(&self.cache);
        let mut s = self.read()?;
        if !change(&mut s) {
            return Ok(());
        }
        s.version = 1;
        let text = serde_json::to_vec_pretty(&s).map_err(|e| e.to_string())?;
        write_atomic(&self.path, &text)
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))?;
        *cache = Some((s, self.mtime()));
        Ok(())
    }

    fn update_or_note(&self, change: impl FnOnce(&mut Stored) -> bool) {
        if let Err(e) = self.update(change) {
            self.note(e);
        }
    }
}

/// Writes `bytes` to `path` through a temporary file created `0600` in the same directory
/// (created `0700` if missing), synced, then renamed over `path`.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| FILE.to_owned());
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let written = opts.open(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    let renamed = written.and_then(|()| fs::rename(&tmp, path));
    if renamed.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    renamed?;
    // The rename itself, made durable (best effort: not every platform can sync a directory).
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn unix_now() -> u64 {
    super::unix_now()
}

impl TokenStore for FileTokenStore {
    fn get(&self, issuer: &str, resource: &str) -> Option<Token> {
        self.with_current(|s| {
            s.tokens
                .iter()
                .find(|e| e.issuer == issuer && e.resource == resource)
                .map(|e| Token {
                    access_token: e.access_token.clone(),
                    refresh_token: e.refresh_token.clone(),
                    expires_at: e.expires_at,
                    scopes: e.scopes.clone(),
                })
        })
        .flatten()
    }

    fn put(&self, issuer: &str, resource: &str, token: Token) {
        self.update_or_note(|s| {
            s.tokens
                .retain(|e| !(e.issuer == issuer && e.resource == resource));
            s.tokens.push(Entry {
                issuer: issuer.to_owned(),
                resource: resource.to_owned(),
                access_token: token.access_token,
                refresh_token: token.refresh_token,
                expires_at: token.expires_at,
                scopes: token.scopes,
                saved_at: unix_now(),
            });
            true
        });
    }

    fn remove(&self, issuer: &str, resource: &str) {
        self.update_or_note(|s| {
            let before = s.tokens.len();
            s.tokens
                .retain(|e| !(e.issuer == issuer && e.resource == resource));
            s.tokens.len() != before
        });
    }

    fn client(&self, issuer: &str) -> Option<StoredClient> {
        self.with_current(|s| {
            s.clients
                .iter()
                .find(|c| c.issuer == issuer)
                .map(|c| StoredClient {
                    client_id: c.client_id.clone(),
                    client_secret: c.client_secret.clone(),
                })
        })
        .flatten()
    }

    fn put_client(&self, issuer: &str, client: StoredClient) {
        self.update_or_note(|s| {
            let same = s.clients.iter().any(|c| {
                c.issuer == issuer
                    && c.client_id == client.client_id
                    && c.client_secret == client.client_secret
            });
            if same {
                return false;
            }
            s.clients.retain(|c| c.issuer != issuer);
            s.clients.push(ClientEntry {
                issuer: issuer.to_owned(),
                client_id: client.client_id,
                client_secret: client.client_secret,
            });
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "verifi-store-{name}-{}-{}",
            std::process::id(),
            TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn token(access: &str, refresh: Option<&str>) -> Token {
        Token {
            access_token: access.into(),
            refresh_token: refresh.map(str::to_owned),
            expires_at: Some(4_000_000_000),
            scopes: vec!["mcp:tools".into()],
        }
    }

    #[test]
    fn tokens_outlive_the_store_and_are_bound_to_issuer_and_resource() {
        let dir = temp_dir("bound");
        let path = dir.join("verifi-mcp").join("tokens.json");
        let a = FileTokenStore::new(&path);
        assert_eq!(a.get("https://as", "https://mcp/mcp"), None);
        a.put(
            "https://as",
            "https://mcp/mcp",
            token("access-1", Some("refresh-1")),
        );
        a.put("https://as", "https://other/mcp", token("access-2", None));
        // Another process (a new store on the same file) sees both.
        let b = FileTokenStore::new(&path);
        assert_eq!(
            b.get("https://as", "https://mcp/mcp"),
            Some(token("access-1", Some("refresh-1")))
        );
        // The same resource under another authorization server: nothing (never the old
        // server's token).
        assert_eq!(b.get("https://evil-as", "https://mcp/mcp"), None);
        assert_eq!(b.get("https://as", "https://mcp/mcp/x"), None);
        // A write by one is read by the other (the file changed).
        b.put(
            "https://as",
            "https://mcp/mcp",
            token("access-3", Some("refresh-3")),
        );
        assert_eq!(
            a.get("https://as", "https://mcp/mcp")
                .map(|t| t.access_token),
            Some("access-3".to_owned())
        );
        a.remove("https://as", "https://mcp/mcp");
        assert_eq!(b.get("https://as", "https://mcp/mcp"), None);
        assert_eq!(b.logins().len(), 1);
        assert!(a.take_error().is_none() && b.take_error().is_none());
        let _ = fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_created_private_and_replaced_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("mode");
        let path = dir.join("verifi-mcp").join("tokens.json");
        let s = FileTokenStore::new(&path);
        s.put("https://as", "https://mcp/mcp", token("access-1", None));
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        // A file left readable by others is replaced by a private one on the next write.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        s.put("https://as", "https://mcp/mcp", token("access-2", None));
        assert_eq!(mode(&path), 0o600);
        // No temporary file is left beside it.
        let names: Vec<String> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["tokens.json".to_owned()]);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_malformed_file_is_reported_and_never_overwritten() {
        let dir = temp_dir("bad");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens.json");
        fs::write(&path, b"{not json").unwrap();
        let s = FileTokenStore::new(&path);
        assert_eq!(s.get("i", "r"), None);
        assert!(s.take_error().unwrap().contains("is not a token file"));
        s.put("i", "r", token("access-1", None));
        assert!(s.take_error().is_some());
        assert_eq!(fs::read(&path).unwrap(), b"{not json");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn clients_are_kept_per_issuer_and_the_data_dir_follows_the_platform() {
        let dir = temp_dir("clients");
        let s = FileTokenStore::new(dir.join("t.json"));
        assert_eq!(s.client("https://as"), None);
        let c = StoredClient {
            client_id: "dyn-1".into(),
            client_secret: Some("dyn-secret".into()),
        };
        s.put_client("https://as", c.clone());
        assert_eq!(
            FileTokenStore::new(dir.join("t.json")).client("https://as"),
            Some(c)
        );
        assert_eq!(s.client("https://other"), None);
        let _ = fs::remove_dir_all(&dir);
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        if cfg!(all(unix, not(target_os = "macos"))) {
            assert_eq!(
                data_dir(&env(&[("HOME", "/h"), ("XDG_DATA_HOME", "/x")])),
                Some(PathBuf::from("/x"))
            );
            // A relative XDG_DATA_HOME is ignored, as the specification says.
            assert_eq!(
                data_dir(&env(&[("HOME", "/h"), ("XDG_DATA_HOME", "rel")])),
                Some(PathBuf::from("/h/.local/share"))
            );
            assert_eq!(data_dir(&env(&[])), None);
        }
    }
}
