//! Secrets a URL carries: the password of its userinfo and the values of query parameters
//! whose names look secret (`api_key`, `access_token`, `X-Amz-Signature`, …). They are
//! secrets of the run ([`url_secrets`]), and an endpoint is printed with them masked
//! ([`mask_url`]).
//!
//! Owns: which parts of a URL are secret. Does not own: redaction (the core) or where a URL
//! comes from (manifest, builder, command line).

/// Words that make a query parameter's value a secret when its name contains one
/// (ASCII case-insensitive).
const SECRET_PARAM_WORDS: &[&str] = &[
    "key",
    "token",
    "secret",
    "pass",
    "pwd",
    "auth",
    "sig",
    "credential",
    "cookie",
    "session",
];

/// What replaces a masked value.
pub const MASK: &str = "[REDACTED]";

/// Whether a query parameter named `name` carries a secret.
pub fn is_secret_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    SECRET_PARAM_WORDS.iter().any(|w| n.contains(w))
}

/// The spans of `url` that are secret: (start, end) byte ranges, in order.
fn secret_spans(url: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let body_at = url.find("://").map_or(0, |i| i + 3);
    let rest = url.get(body_at..).unwrap_or("");
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = rest.get(..auth_end).unwrap_or("");
    if let Some(at) = authority.rfind('@')
        && let Some(colon) = authority.get(..at).and_then(|u| u.find(':'))
        && colon + 1 < at
    {
        spans.push((body_at + colon + 1, body_at + at));
    }
    if let Some(q) = url.find('?') {
        let end = url
            .get(q..)
            .and_then(|t| t.find('#'))
            .map_or(url.len(), |h| q + h);
        let mut at = q + 1;
        for pair in url.get(q + 1..end).unwrap_or("").split('&') {
            if let Some(eq) = pair.find('=') {
                let name = pair.get(..eq).unwrap_or("");
                let decoded: String = form_urlencoded::parse(name.as_bytes())
                    .map(|(k, _)| k.into_owned())
                    .collect();
                if eq + 1 < pair.len() && is_secret_param(&decoded) {
                    spans.push((at + eq + 1, at + pair.len()));
                }
            }
            at += pair.len() + 1;
        }
    }
    spans
}

fn percent_decoded(s: &str) -> String {
    percent_decode(s.as_bytes())
}

fn percent_decode(b: &[u8]) -> String {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b.get(i),
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (Some(b'%'), Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (Some(c), _, _) => {
                out.push(*c);
                i += 1;
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The secrets `url` carries: each secret part as written and, when it differs, decoded
/// (`%xx`; `+` as a space too in the query). Parts under 4 bytes are left out (the core's
/// minimum).
pub fn url_secrets(url: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |s: String| {
        if s.len() >= 4 && !out.contains(&s) {
            out.push(s);
        }
    };
    let q = url.find('?').unwrap_or(usize::MAX);
    for (a, b) in secret_spans(url) {
        let Some(raw) = url.get(a..b) else { continue };
        add(raw.to_owned());
        add(percent_decoded(raw));
        if a > q {
            add(percent_decoded(&raw.replace('+', " ")));
        }
    }
    out
}

/// `url` with its secret parts (see [`url_secrets`]) replaced by `[REDACTED]`.
pub fn mask_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let mut at = 0;
    for (a, b) in secret_spans(url) {
        out.push_str(url.get(at..a).unwrap_or(""));
        out.push_str(MASK);
        at = b;
    }
    out.push_str(url.get(at..).unwrap_or(""));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_secret_looking_query_values_are_secrets() {
        let u = "http://user:p%40ss-word@host:8080/mcp?api_key=k3y-value&page=2&X-Amz-Signature=abc123def&access_token=t+o%2Bk&sig=&auth=xyz9#frag";
        assert_eq!(
            mask_url(u),
            "http://user:[REDACTED]@host:8080/mcp?api_key=[REDACTED]&page=2&X-Amz-Signature=[REDACTED]&access_token=[REDACTED]&sig=&auth=[REDACTED]#frag"
        );
        let s = url_secrets(u);
        for want in [
            "p%40ss-word",
            "p@ss-word",
            "k3y-value",
            "abc123def",
            "t+o%2Bk",
            "t+o+k",
            "t o+k",
            "xyz9",
        ] {
            assert!(s.iter().any(|x| x == want), "{want} not in {s:?}");
        }
        assert!(
            !s.iter().any(|x| x == "2" || x == "user" || x == "frag"),
            "{s:?}"
        );
        // Nothing secret: unchanged.
        for plain in [
            "http://127.0.0.1:8080/mcp",
            "http://user@host/mcp?page=2",
            "https://h/p?monkey",
            "stdio:uvx x",
            "http://u:@h/",
        ] {
            assert_eq!(mask_url(plain), plain);
        }
        assert!(url_secrets("http://127.0.0.1/mcp?page=22222").is_empty());
        // An @ in the path is no userinfo.
        assert_eq!(mask_url("http://h/a:b@c"), "http://h/a:b@c");
        assert!(
            is_secret_param("API_KEY") && is_secret_param("password") && !is_secret_param("page")
        );
    }
}
