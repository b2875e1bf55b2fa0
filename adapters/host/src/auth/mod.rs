//! `auth`: the OAuth 2.1 client of the MCP authorization specification, for the host adapter.
//!
//! A slot configured with [`AuthConfig`] gets a bearer token before its first call: the
//! server's challenge (an unauthenticated probe) or its well-known paths give the
//! protected-resource metadata (RFC 9728), that names the authorization server, whose metadata
//! (RFC 8414, then OpenID discovery) gives the token endpoint. Then a token by client
//! credentials (`client_secret_basic`, `client_secret_post` or `private_key_jwt`), or by the
//! authorization code with PKCE through a caller's [`AuthorizeHook`]; `resource` (RFC 8707) on
//! every request to the authorization server. Tokens are kept per issuer and resource in a
//! [`TokenStore`] (memory by default; [`store::FileTokenStore`] keeps them across runs),
//! renewed before expiry, and renewed once on a 401.
//! Every token, secret and assertion joins the run's secrets.
//!
//! Owns: the flow and its state. The decisions are plain functions in [`decide`]; the
//! requests are [`client`]'s; finding the authorization server is
//! [`discover`](mod@discover)'s.

pub mod client;
pub mod decide;
pub mod discover;
#[cfg(test)]
mod hostile_input;
pub mod loopback;
pub mod pkce;
pub(crate) mod slot;
pub mod store;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::Value;

use crate::net::{HostNet, Route};
use client::{HttpFailure, HttpReply, Request, send};
use decide::{
    AuthDecisionError, Challenge, ClientAuth, TokenUse, check_transport, choose_client_auth,
    choose_scopes, token_use,
};
use discover::string;
pub use discover::{Discovered, ServerMetadata, asked_for, discover, discover_with, probe};

/// Which flow a slot uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthFlow {
    /// Client credentials when a secret or key is given, else the authorization code when a
    /// hook is given.
    #[default]
    Auto,
    /// Client credentials only (unattended).
    ClientCredentials,
    /// Authorization code with PKCE only.
    AuthorizationCode,
}

impl AuthFlow {
    /// `auto`, `client-credentials` or `authorization-code`.
    pub fn parse(s: &str) -> Option<AuthFlow> {
        match s {
            "auto" => Some(AuthFlow::Auto),
            "client-credentials" | "client_credentials" => Some(AuthFlow::ClientCredentials),
            "authorization-code" | "authorization_code" => Some(AuthFlow::AuthorizationCode),
            _ => None,
        }
    }
}

/// A token as issued.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// The access token.
    pub access_token: String,
    /// The refresh token, if one was issued.
    pub refresh_token: Option<String>,
    /// When it expires, in Unix seconds (None: not stated).
    pub expires_at: Option<u64>,
    /// The scopes granted (as stated, else as requested).
    pub scopes: Vec<String>,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// The client a token was obtained with: a pre-registered id (no secret kept), or a client
/// registered dynamically (with its secret, if it got one).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredClient {
    /// The client id.
    pub client_id: String,
    /// The secret of a dynamically registered confidential client.
    pub client_secret: Option<String>,
}

impl fmt::Debug for StoredClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredClient")
            .field("client_id", &self.client_id)
            .field("has_secret", &self.client_secret.is_some())
            .finish()
    }
}

/// Where tokens are kept, per authorization-server issuer and resource: a token is handed
/// back only for the pair it was kept under. [`MemoryTokenStore`] is the default;
/// [`store::FileTokenStore`] keeps tokens (and the clients that obtained them) across runs.
pub trait TokenStore: Send + Sync {
    /// The token for `issuer` and `resource`, if held.
    fn get(&self, issuer: &str, resource: &str) -> Option<Token>;
    /// Keeps `token` for `issuer` and `resource`.
    fn put(&self, issuer: &str, resource: &str, token: Token);
    /// Forgets the token for `issuer` and `resource`.
    fn remove(&self, issuer: &str, resource: &str);
    /// The client last used with `issuer`, if this store keeps clients (default: none; a run
    /// remembers its own registrations anyway).
    fn client(&self, _issuer: &str) -> Option<StoredClient> {
        None
    }
    /// Keeps the client used with `issuer`, so a later run can refresh the tokens it got
    /// (default: not kept).
    fn put_client(&self, _issuer: &str, _client: StoredClient) {}
}

/// Tokens in memory, for the run.
#[derive(Default)]
pub struct MemoryTokenStore(Mutex<HashMap<(String, String), Token>>);

impl TokenStore for MemoryTokenStore {
    fn get(&self, issuer: &str, resource: &str) -> Option<Token> {
        lock(&self.0)
            .get(&(issuer.to_owned(), resource.to_owned()))
            .cloned()
    }
    fn put(&self, issuer: &str, resource: &str, token: Token) {
        lock(&self.0).insert((issuer.to_owned(), resource.to_owned()), token);
    }
    fn remove(&self, issuer: &str, resource: &str) {
        lock(&self.0).remove(&(issuer.to_owned(), resource.to_owned()));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the authorization step is given: the URL a person (or an auto-approving server) must
/// visit, and where the answer comes back.
#[derive(Debug, Clone)]
pub struct AuthorizeRequest {
    /// The full authorization URL (with state, PKCE challenge, resource, scope).
    pub url: String,
    /// The redirect URI registered for the client.
    pub redirect_uri: String,
    /// The `state` sent (the hook may check it; the flow always does).
    pub state: String,
}

/// The authorization step of the code flow, supplied by the caller: visit
/// [`AuthorizeRequest::url`] and return the full redirect URL that came back (with `code`,
/// `state`, `iss`), or why not.
pub trait AuthorizeHook: Send + Sync {
    /// Runs the step; `Ok(redirect_url)`.
    fn authorize<'a>(
        &'a self,
        req: &'a AuthorizeRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + 'a>>;
    /// The redirect URI this hook receives on (registered with the client).
    fn redirect_uri(&self) -> String;
}

/// A slot's OAuth settings.
#[derive(Clone, Default)]
pub struct AuthConfig {
    /// The flow (default auto).
    pub flow: AuthFlow,
    /// A pre-registered client id.
    pub client_id: Option<String>,
    /// Its secret (`client_secret_basic` / `client_secret_post`).
    pub client_secret: Option<String>,
    /// Its private key, PKCS#8 PEM (P-256), for `private_key_jwt` with ES256.
    pub client_private_key: Option<Vec<u8>>,
    /// A client ID metadata document URL, used as the client id where the server supports it.
    pub client_metadata_url: Option<String>,
    /// The scopes to ask for (space-separated); else the challenge's, else the resource's.
    pub scope: Option<String>,
    /// The authorization step of the code flow.
    pub authorize: Option<Arc<dyn AuthorizeHook>>,
    /// Where tokens are kept (None: in memory for the run).
    pub store: Option<Arc<dyn TokenStore>>,
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("flow", &self.flow)
            .field("client_id", &self.client_id)
            .field("has_secret", &self.client_secret.is_some())
            .field("has_key", &self.client_private_key.is_some())
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl AuthConfig {
    /// Whether anything is configured (else the slot does no OAuth).
    pub fn is_configured(&self) -> bool {
        self.flow != AuthFlow::Auto
            || self.client_id.is_some()
            || self.client_secret.is_some()
            || self.client_private_key.is_some()
            || self.client_metadata_url.is_some()
            || self.authorize.is_some()
    }

    /// The values to redact (the secret, and the key's PEM text).
    pub fn secrets(&self) -> Vec<String> {
        let mut s: Vec<String> = self.client_secret.iter().cloned().collect();
        if let Some(k) = &self.client_private_key {
            s.extend(
                String::from_utf8_lossy(k)
                    .lines()
                    .filter(|l| !l.starts_with("-----") && l.len() >= 16)
                    .map(str::to_owned),
            );
        }
        s
    }
}

/// Why no token could be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// A decision refused to go on (mismatch, no method, …).
    Decision(AuthDecisionError),
    /// A request failed before a reply.
    Http(HttpFailure),
    /// The authorization server answered with an OAuth error.
    Server {
        /// What was asked (`token`, `registration`, …).
        what: &'static str,
        /// The HTTP status.
        status: u16,
        /// `error` and `error_description`, or the start of the body.
        detail: String,
    },
    /// Metadata was missing or unusable.
    Metadata(String),
    /// The server asked for authorization that no configured flow can give.
    NoFlow {
        /// What the server asked for, in words.
        asked: String,
    },
    /// The authorization step failed.
    Authorize(String),
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::Decision(d) => write!(f, "authorization stopped: {d}"),
            AuthError::Http(h) => write!(f, "authorization request failed: {h}"),
            AuthError::Server {
                what,
                status,
                detail,
            } => write!(
                f,
                "authorization server refused the {what} request ({status}): {detail}"
            ),
            AuthError::Metadata(m) => write!(f, "authorization metadata: {m}"),
            AuthError::NoFlow { asked } => write!(
                f,
                "the server wants OAuth authorization ({asked}), and no flow is configured: \
                 give --client-id with --client-secret or --client-private-key, an \
                 authorization-code hook, or --bearer TOKEN"
            ),
            AuthError::Authorize(m) => write!(f, "authorization step failed: {m}"),
        }
    }
}

impl std::error::Error for AuthError {}

impl From<AuthDecisionError> for AuthError {
    fn from(e: AuthDecisionError) -> Self {
        AuthError::Decision(e)
    }
}

impl From<HttpFailure> for AuthError {
    fn from(e: HttpFailure) -> Self {
        AuthError::Http(e)
    }
}

/// The client the token endpoint is told about.
#[derive(Clone)]
struct Client {
    id: String,
    secret: Option<String>,
    /// The `token_endpoint_auth_method` its registration reply named.
    method: Option<String>,
}

/// Most tokens, secrets and assertions a run keeps among its secrets.
pub const MAX_LEARNED: usize = 4096;

/// How long a person may take at the authorization step.
const PERSON_DEADLINE: Duration = Duration::from_secs(300);

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One slot's authorization state.
pub struct Authorizer {
    cfg: AuthConfig,
    store: Arc<dyn TokenStore>,
    /// Serializes discovery and token requests (concurrent calls wait for one).
    gate: async_lock::Mutex<()>,
    discovered: Mutex<Option<Discovered>>,
    /// A client registered dynamically, per issuer.
    registered: Mutex<HashMap<String, Client>>,
    /// Every token, secret and assertion seen: redacted everywhere.
    learned: Arc<Mutex<Vec<String>>>,
    /// How long one authorization (discovery and token requests) may take: the call's timeout.
    timeout: Duration,
}

impl fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authorizer")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    /// An authorizer with `cfg`, adding what it learns to `learned`; each authorization's
    /// requests share `timeout` (a person at the authorization step has 5 minutes more).
    pub fn new(cfg: AuthConfig, learned: Arc<Mutex<Vec<String>>>, timeout: Duration) -> Authorizer {
        let store = cfg
            .store
            .clone()
            .unwrap_or_else(|| Arc::new(MemoryTokenStore::default()));
        lock(&learned).extend(cfg.secrets());
        Authorizer {
            cfg,
            store,
            gate: async_lock::Mutex::new(()),
            discovered: Mutex::new(None),
            registered: Mutex::new(HashMap::new()),
            learned,
            timeout,
        }
    }

    fn learn(&self, s: &str) {
        if s.len() >= 4 {
            let mut l = lock(&self.learned);
            if !l.iter().any(|x| x == s) {
                // Bounded: a run renewing short-lived tokens for days forgets the oldest
                // (long expired) ones rather than growing the redactor's work without end.
                if l.len() >= MAX_LEARNED {
                    l.remove(0);
                }
                l.push(s.to_owned());
            }
        }
    }

    /// What discovery found, once it ran.
    pub fn discovered(&self) -> Option<Discovered> {
        lock(&self.discovered).clone()
    }

    /// The access token to send to `mcp_url` (discovering and requesting as needed).
    pub async fn bearer(
        &self,
        net: &HostNet,
        route: &Route,
        mcp_url: &str,
    ) -> Result<String, AuthError> {
        let _g = self.gate.lock().await;
        let deadline = Instant::now() + self.timeout;
        let d = match self.discovered() {
            Some(d) => d,
            None => {
                let d = discover(net, route, mcp_url, deadline).await?;
                *lock(&self.discovered) = Some(d.clone());
                d
            }
        };
        let (issuer, resource) = (&d.server.issuer, &d.resource);
        if let Some(t) = self.store.get(issuer, resource) {
            // A token from a store that outlives the run is a secret of this run too.
            self.learn(&t.access_token);
            if let Some(r) = &t.refresh_token {
                self.learn(r);
            }
            match token_use(t.expires_at, t.refresh_token.is_some(), unix_now()) {
                TokenUse::Use => return Ok(t.access_token),
                TokenUse::Refresh => {
                    if let Ok(new) = self.refresh(net, route, &d, &t, deadline).await {
                        return Ok(new.access_token);
                    }
                    self.store.remove(issuer, resource);
                }
                TokenUse::Renew => self.store.remove(issuer, resource),
            }
        }
        let t = self.obtain(net, route, &d, None, deadline).await?;
        Ok(t.access_token)
    }

    /// After a 401 to `access_token` (with the reply's `challenge`, if it had one): reads the
    /// server's metadata again, since it may name another authorization server now
    /// (SEP-2352). The same one: forgets the token (its refresh token is tried first, else a
    /// new token is requested next time). Another one: forgets every token and client of the
    /// one before, so the next token comes from the new one by a new registration; a client
    /// id given by the caller is refused there ([`decide::authorization_server_moved`]).
    /// Nothing is read again when another call already renewed the token.
    pub async fn rejected(
        &self,
        net: &HostNet,
        route: &Route,
        mcp_url: &str,
        access_token: &str,
        challenge: Option<Challenge>,
    ) -> Result<(), AuthError> {
        let _g = self.gate.lock().await;
        let Some(before) = self.discovered() else {
            return Ok(());
        };
        let held = self.store.get(&before.server.issuer, &before.resource);
        if held
            .as_ref()
            .is_some_and(|t| t.access_token != access_token)
        {
            return Ok(());
        }
        let deadline = Instant::now() + self.timeout;
        let d = discover_with(net, route, mcp_url, challenge, deadline).await?;
        let moved = decide::authorization_server_moved(
            &before.server.issuer,
            &d.server.issuer,
            self.cfg.client_id.is_some(),
        )?;
        *lock(&self.discovered) = Some(d.clone());
        self.store.remove(&before.server.issuer, &before.resource);
        if moved {
            lock(&self.registered).remove(&before.server.issuer);
            return Ok(());
        }
        if let Some(t) = held
            && t.refresh_token.is_some()
        {
            let _ = self.refresh(net, route, &d, &t, deadline).await;
        }
        Ok(())
    }

    /// A token for `scopes` (a step-up), replacing the held one.
    pub async fn step_up(
        &self,
        net: &HostNet,
        route: &Route,
        scopes: Vec<String>,
    ) -> Result<String, AuthError> {
        let _g = self.gate.lock().await;
        let deadline = Instant::now() + self.timeout;
        let d = self
            .discovered()
            .ok_or_else(|| AuthError::Metadata("step-up before discovery".into()))?;
        self.store.remove(&d.server.issuer, &d.resource);
        Ok(self
            .obtain(net, route, &d, Some(scopes), deadline)
            .await?
            .access_token)
    }

    /// The access token held now, without any request (None: none yet).
    pub fn held_token(&self) -> Option<String> {
        self.discovered()
            .and_then(|d| self.store.get(&d.server.issuer, &d.resource))
            .map(|t| t.access_token)
    }

    /// The scopes of the held token.
    pub fn held_scopes(&self) -> Vec<String> {
        self.discovered()
            .and_then(|d| self.store.get(&d.server.issuer, &d.resource))
            .map(|t| t.scopes)
            .unwrap_or_default()
    }

    fn flow(&self) -> AuthFlow {
        match self.cfg.flow {
            AuthFlow::Auto => {
                if self.cfg.client_secret.is_some() || self.cfg.client_private_key.is_some() {
                    AuthFlow::ClientCredentials
                } else {
                    AuthFlow::AuthorizationCode
                }
            }
            f => f,
        }
    }

    async fn obtain(
        &self,
        net: &HostNet,
        route: &Route,
        d: &Discovered,
        scopes: Option<Vec<String>>,
        deadline: Instant,
    ) -> Result<Token, AuthError> {
        let meta = &d.server;
        let flow = self.flow();
        let want_refresh = flow == AuthFlow::AuthorizationCode;
        let scopes = scopes.unwrap_or_else(|| {
            choose_scopes(
                self.cfg.scope.as_deref(),
                d.challenge.as_ref(),
                &d.resource_scopes,
                &meta.scopes_supported,
                want_refresh,
            )
        });
        check_transport(&meta.token_endpoint)?;
        let mut form: Vec<(&str, String)> = Vec::new();
        match flow {
            AuthFlow::ClientCredentials | AuthFlow::Auto => {
                form.push(("grant_type", "client_credentials".into()));
            }
            AuthFlow::AuthorizationCode => {
                let (code, verifier, redirect) =
                    self.authorize(net, route, d, &scopes, deadline).await?;
                form.push(("grant_type", "authorization_code".into()));
                form.push(("code", code));
                form.push(("code_verifier", verifier));
                form.push(("redirect_uri", redirect));
            }
        }
        form.push(("resource", d.resource.clone()));
        if !scopes.is_empty() && flow != AuthFlow::AuthorizationCode {
            form.push(("scope", scopes.join(" ")));
        }
        let t = self
            .token_request(net, route, d, form, &scopes, deadline)
            .await?;
        self.store.put(&meta.issuer, &d.resource, t.clone());
        // A person's login with a pre-registered id: the id is kept (a secret never is), so
        // a later run can use the refresh token, which is bound to the client.
        if let Some(id) = &self.cfg.client_id
            && flow == AuthFlow::AuthorizationCode
        {
            self.store.put_client(
                &meta.issuer,
                StoredClient {
                    client_id: id.clone(),
                    client_secret: None,
                },
            );
        }
        Ok(t)
    }

    async fn refresh(
        &self,
        net: &HostNet,
        route: &Route,
        d: &Discovered,
        old: &Token,
        deadline: Instant,
    ) -> Result<Token, AuthError> {
        let Some(rt) = &old.refresh_token else {
            return Err(AuthError::Metadata("no refresh token".into()));
        };
        let form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", rt.clone()),
            ("resource", d.resource.clone()),
        ];
        let mut t = self
            .token_request(net, route, d, form, &old.scopes, deadline)
            .await?;
        if t.refresh_token.is_none() {
            t.refresh_token = old.refresh_token.clone();
        }
        self.store.put(&d.server.issuer, &d.resource, t.clone());
        Ok(t)
    }

    /// The client id for this issuer: pre-registered, a metadata document URL (when the
    /// server supports them), else a dynamic registration (never another server's id).
    async fn client(
        &self,
        net: &HostNet,
        route: &Route,
        d: &Discovered,
        deadline: Instant,
    ) -> Result<Client, AuthError> {
        if let Some(id) = &self.cfg.client_id {
            return Ok(Client {
                id: id.clone(),
                secret: self.cfg.client_secret.clone(),
                method: None,
            });
        }
        let meta = &d.server;
        if let Some(url) = &self.cfg.client_metadata_url
            && meta.client_id_metadata_documents
        {
            return Ok(Client {
                id: url.clone(),
                secret: None,
                method: None,
            });
        }
        if let Some(c) = lock(&self.registered).get(&meta.issuer) {
            return Ok(c.clone());
        }
        // A client an earlier run used with this issuer (its refresh tokens are bound to it).
        if let Some(c) = self.store.client(&meta.issuer) {
            if let Some(s) = &c.client_secret {
                self.learn(s);
            }
            let c = Client {
                id: c.client_id,
                secret: c.client_secret,
                method: None,
            };
            lock(&self.registered).insert(meta.issuer.clone(), c.clone());
            return Ok(c);
        }
        let Some(reg) = &meta.registration_endpoint else {
            return Err(AuthError::Metadata(format!(
                "no client id for {}: give --client-id (the server offers neither client ID \
                 metadata documents nor dynamic registration)",
                meta.issuer
            )));
        };
        check_transport(reg)?;
        let redirect = self.cfg.authorize.as_ref().map(|h| h.redirect_uri());
        let code_flow = self.flow() == AuthFlow::AuthorizationCode;
        let body = decide::registration_request(code_flow, redirect.as_deref(), false);
        let bytes = body.to_string();
        let reply = send(
            net,
            route,
            &Request {
                method: "POST",
                url: reg,
                headers: &[],
                body: Some(("application/json", bytes.as_bytes())),
                accept: "application/json",
            },
            deadline,
        )
        .await?;
        let v = reply.json().unwrap_or(Value::Null);
        if !(200..300).contains(&reply.status) {
            return Err(server_error("registration", &reply));
        }
        let id = string(&v, "client_id")
            .ok_or_else(|| AuthError::Metadata("registration reply has no client_id".into()))?;
        let secret = string(&v, "client_secret");
        if let Some(s) = &secret {
            self.learn(s);
        }
        if let Some(s) = string(&v, "registration_access_token") {
            self.learn(&s);
        }
        let c = Client {
            id,
            secret,
            method: string(&v, "token_endpoint_auth_method"),
        };
        lock(&self.registered).insert(meta.issuer.clone(), c.clone());
        self.store.put_client(
            &meta.issuer,
            StoredClient {
                client_id: c.id.clone(),
                client_secret: c.secret.clone(),
            },
        );
        Ok(c)
    }

    async fn token_request(
        &self,
        net: &HostNet,
        route: &Route,
        d: &Discovered,
        mut form: Vec<(&str, String)>,
        requested: &[String],
        deadline: Instant,
    ) -> Result<Token, AuthError> {
        let meta = &d.server;
        let Client {
            id: client_id,
            secret,
            method: registered,
        } = self.client(net, route, d, deadline).await?;
        let key = self.cfg.client_private_key.as_deref();
        let method = choose_client_auth(
            meta.auth_methods.as_deref(),
            decide::Held {
                secret: secret.is_some(),
                key: key.is_some(),
                registered: registered.as_deref(),
                // The code flow (and the refresh of its tokens) is proven by PKCE.
                public_ok: self.flow() == AuthFlow::AuthorizationCode,
            },
        )?;
        let mut headers: Vec<(&str, String)> = Vec::new();
        match method {
            ClientAuth::SecretBasic => {
                let enc =
                    |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
                let basic = STANDARD.encode(format!(
                    "{}:{}",
                    enc(&client_id),
                    enc(secret.as_deref().unwrap_or(""))
                ));
                self.learn(&basic);
                headers.push(("authorization", format!("Basic {basic}")));
            }
            ClientAuth::SecretPost => {
                form.push(("client_id", client_id.clone()));
                form.push(("client_secret", secret.clone().unwrap_or_default()));
            }
            ClientAuth::PrivateKeyJwt => {
                let jwt = pkce::es256_assertion(key.unwrap_or(&[]), &client_id, &meta.issuer)
                    .map_err(AuthError::Metadata)?;
                self.learn(&jwt);
                form.push(("client_id", client_id.clone()));
                form.push((
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into(),
                ));
                form.push(("client_assertion", jwt));
            }
            ClientAuth::None => form.push(("client_id", client_id.clone())),
        }
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
            .finish();
        let hdrs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let reply = send(
            net,
            route,
            &Request {
                method: "POST",
                url: &meta.token_endpoint,
                headers: &hdrs,
                body: Some(("application/x-www-form-urlencoded", body.as_bytes())),
                accept: "application/json",
            },
            deadline,
        )
        .await?;
        if !(200..300).contains(&reply.status) {
            return Err(server_error("token", &reply));
        }
        let v = reply
            .json()
            .ok_or_else(|| AuthError::Metadata("token reply is not JSON".into()))?;
        let access = string(&v, "access_token")
            .ok_or_else(|| AuthError::Metadata("token reply has no access_token".into()))?;
        self.learn(&access);
        let token_type = string(&v, "token_type").unwrap_or_default();
        if !token_type.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::Metadata(format!(
                "token_type {token_type:?} is not Bearer"
            )));
        }
        let refresh = string(&v, "refresh_token");
        if let Some(r) = &refresh {
            self.learn(r);
        }
        if let Some(id) = string(&v, "id_token") {
            self.learn(&id);
        }
        let expires_at = v
            .get("expires_in")
            .and_then(Value::as_u64)
            .map(|s| unix_now().saturating_add(s));
        let scopes = string(&v, "scope")
            .map(|s| decide::split_scopes(&s))
            .unwrap_or_else(|| requested.to_vec());
        Ok(Token {
            access_token: access,
            refresh_token: refresh,
            expires_at,
            scopes,
        })
    }

    /// The authorization step: PKCE S256, state, resource; the hook visits the URL; the
    /// redirect's state and iss are checked. Returns (code, verifier, redirect_uri).
    async fn authorize(
        &self,
        net: &HostNet,
        route: &Route,
        d: &Discovered,
        scopes: &[String],
        deadline: Instant,
    ) -> Result<(String, String, String), AuthError> {
        let meta = &d.server;
        let hook = self
            .cfg
            .authorize
            .clone()
            .ok_or_else(|| AuthError::NoFlow {
                asked: asked_for(d),
            })?;
        let endpoint = meta.authorization_endpoint.clone().ok_or_else(|| {
            AuthError::Metadata(format!("{} has no authorization_endpoint", meta.issuer))
        })?;
        check_transport(&endpoint)?;
        if !meta.code_challenge_methods.iter().any(|m| m == "S256") {
            return Err(AuthError::Metadata(format!(
                "{} does not list S256 in code_challenge_methods_supported; refusing \
                 without PKCE",
                meta.issuer
            )));
        }
        let client_id = self.client(net, route, d, deadline).await?.id;
        let verifier = pkce::random_urlsafe(32);
        let state = pkce::random_urlsafe(16);
        let redirect = hook.redirect_uri();
        // Built in a block: the serializer is not `Send` and must not live across an await.
        let query = {
            let mut q = form_urlencoded::Serializer::new(String::new());
            q.append_pair("response_type", "code")
                .append_pair("client_id", &client_id)
                .append_pair("redirect_uri", &redirect)
                .append_pair("code_challenge", &pkce::s256(&verifier))
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state)
                .append_pair("resource", &d.resource);
            if !scopes.is_empty() {
                q.append_pair("scope", &scopes.join(" "));
            }
            q.finish()
        };
        let sep = if endpoint.contains('?') { '&' } else { '?' };
        let req = AuthorizeRequest {
            url: format!("{endpoint}{sep}{query}"),
            redirect_uri: redirect.clone(),
            state: state.clone(),
        };
        // An auto-approving server answers the GET itself with a redirect carrying the code;
        // else a person approves through the hook.
        let first = send(
            net,
            route,
            &Request {
                method: "GET",
                url: &req.url,
                headers: &[],
                body: None,
                accept: "text/html, application/json",
            },
            deadline,
        )
        .await?;
        let auto = first
            .header("location")
            .filter(|l| (300..400).contains(&first.status) && l.starts_with(redirect.as_str()))
            .map(str::to_owned);
        let back = match auto {
            Some(location) => location,
            None => futures_lite::future::or(hook.authorize(&req), async {
                async_io::Timer::at(deadline + PERSON_DEADLINE).await;
                Err("no answer within 5 minutes".to_owned())
            })
            .await
            .map_err(AuthError::Authorize)?,
        };
        let params = pkce::redirect_params(&back);
        let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        if get("state") != Some(state.as_str()) {
            return Err(AuthDecisionError::StateMismatch.into());
        }
        decide::check_iss(get("iss"), &meta.issuer, meta.iss_parameter)?;
        if let Some(e) = get("error") {
            return Err(AuthError::Authorize(format!(
                "{e}: {}",
                get("error_description").unwrap_or("")
            )));
        }
        let code = get("code")
            .ok_or_else(|| AuthError::Authorize("redirect has no code".into()))?
            .to_owned();
        self.learn(&code);
        Ok((code, verifier, redirect))
    }
}

fn server_error(what: &'static str, reply: &HttpReply) -> AuthError {
    let detail = match reply.json() {
        Some(v) if v.get("error").is_some() => format!(
            "{}{}",
            string(&v, "error").unwrap_or_default(),
            string(&v, "error_description")
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ),
        _ => String::from_utf8_lossy(reply.body.get(..200).unwrap_or(&reply.body))
            .trim()
            .to_owned(),
    };
    AuthError::Server {
        what,
        status: reply.status,
        detail,
    }
}

/// `URL_SAFE_NO_PAD` of `bytes` (for the `pkce` module).
pub(crate) fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learned_secrets_are_bounded_and_config_secrets_join_at_once() {
        let learned = Arc::new(Mutex::new(Vec::new()));
        let a = Authorizer::new(
            AuthConfig {
                client_id: Some("c".into()),
                client_secret: Some("the-client-secret".into()),
                ..AuthConfig::default()
            },
            learned.clone(),
            Duration::from_secs(1),
        );
        assert_eq!(*lock(&learned), vec!["the-client-secret".to_owned()]);
        for i in 0..(MAX_LEARNED + 10) {
            a.learn(&format!("token-{i:06}"));
        }
        a.learn("abc"); // under 4 characters: never a secret (it would scrub evidence)
        let l = lock(&learned);
        assert_eq!(l.len(), MAX_LEARNED);
        assert_eq!(l.last().map(String::as_str), Some("token-004105"));
        assert!(!l.iter().any(|s| s == "abc"));
        assert!(format!("{a:?}").contains("has_secret: true"));
        assert!(!format!("{a:?}").contains("the-client-secret"));
    }

    #[test]
    fn flows_parse_and_metadata_needs_issuer_and_token_endpoint() {
        assert_eq!(
            AuthFlow::parse("client-credentials"),
            Some(AuthFlow::ClientCredentials)
        );
        assert_eq!(
            AuthFlow::parse("authorization-code"),
            Some(AuthFlow::AuthorizationCode)
        );
        assert_eq!(AuthFlow::parse("auto"), Some(AuthFlow::Auto));
        assert_eq!(AuthFlow::parse("implicit"), None);
        let ok = serde_json::json!({"issuer": "https://a", "token_endpoint": "https://a/t",
            "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            "authorization_response_iss_parameter_supported": true});
        let m = ServerMetadata::from_json(&ok).unwrap();
        assert!(m.iss_parameter && !m.client_id_metadata_documents);
        assert_eq!(m.auth_methods, Some(vec!["private_key_jwt".to_owned()]));
        assert!(ServerMetadata::from_json(&serde_json::json!({"issuer": "x"})).is_err());
        assert!(!AuthConfig::default().is_configured());
        let t = Token {
            access_token: "secret-access".into(),
            refresh_token: None,
            expires_at: None,
            scopes: vec![],
        };
        assert!(!format!("{t:?}").contains("secret-access"));
    }
}
