//! Who may read the view: the token, and the Host check.
//!
//! A token is required off loopback. It is accepted from an
//! `Authorization: Bearer` header, a `token` query parameter (the printed
//! URL carries it) or the cookie the first page sets, so the browser's
//! script, style and event stream requests carry it too. It is compared as
//! BLAKE3 hashes with a constant-time equality, so the time a refusal takes
//! says nothing about how much of the token was right.
//!
//! On loopback the Host header must name the loopback address the view was
//! reached at: a page on another site whose name was rebound to 127.0.0.1
//! (DNS rebinding) sends its own name and is refused.

use runlog::run::RunError;
use std::net::SocketAddr;

/// The shortest token accepted, in bytes: a shorter one could be guessed.
pub const MIN_TOKEN_BYTES: usize = 16;
/// The longest token accepted, in bytes.
pub const MAX_TOKEN_BYTES: usize = 4096;
/// The longest token file read, in bytes.
pub const MAX_TOKEN_FILE_BYTES: u64 = 8192;

/// A token, kept as its hash.
#[derive(Clone)]
pub struct Token {
    hash: blake3::Hash,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// Checks `t` (16–4096 bytes of visible ASCII) and keeps its hash.
    pub fn new(t: &str) -> Result<Token, RunError> {
        if !(MIN_TOKEN_BYTES..=MAX_TOKEN_BYTES).contains(&t.len()) {
            return Err(RunError::Invalid(format!(
                "the token must be {MIN_TOKEN_BYTES}–{MAX_TOKEN_BYTES} bytes, not {}",
                t.len()
            )));
        }
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(RunError::Invalid(
                "the token must be visible ASCII characters (no spaces or control characters)"
                    .into(),
            ));
        }
        Ok(Token {
            hash: blake3::hash(t.as_bytes()),
        })
    }

    /// True when `given` is the token; constant time in the token's bytes
    /// (`blake3::Hash`'s equality is constant-time).
    pub fn matches(&self, given: &str) -> bool {
        blake3::hash(given.as_bytes()) == self.hash
    }
}

/// Reads a token file: its first line, without the line ending.
pub fn read_token_file(path: &std::path::Path) -> Result<String, RunError> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            RunError::Invalid(format!("token file {} does not exist", path.display()))
        } else {
            RunError::Io {
                op: "open the token file",
                path: path.into(),
                source: e,
            }
        }
    })?;
    let mut s = String::new();
    f.take(MAX_TOKEN_FILE_BYTES)
        .read_to_string(&mut s)
        .map_err(|e| RunError::Io {
            op: "read the token file",
            path: path.into(),
            source: e,
        })?;
    let line = s.lines().next().unwrap_or("").trim_end_matches('\r');
    if line.is_empty() {
        return Err(RunError::Invalid(format!(
            "token file {} is empty",
            path.display()
        )));
    }
    Ok(line.to_string())
}

/// The cookie the view sets once a request carried the right token. Named
/// after the port: two views on one host keep a cookie each.
pub fn cookie_name(port: u16) -> String {
    format!("runlog_ui_{port}")
}

/// The token a request carries, if any: header, then query, then cookie.
pub fn token_of<'a>(
    authorization: Option<&'a str>,
    query: Option<&'a str>,
    cookies: impl Iterator<Item = &'a str>,
    cookie: &str,
) -> Option<String> {
    if let Some(t) = authorization.and_then(|a| a.strip_prefix("Bearer ")) {
        return Some(t.trim().to_string());
    }
    if let Some(q) = query {
        for pair in q.split('&') {
            if let Some(v) = pair.strip_prefix("token=") {
                return Some(percent_decode(v));
            }
        }
    }
    for header in cookies {
        for c in header.split(';') {
            if let Some((k, v)) = c.trim().split_once('=')
                && k == cookie
            {
                return Some(percent_decode(v));
            }
        }
    }
    None
}

/// Percent-encodes everything but unreserved characters.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes and `+`; a malformed escape is kept as it is.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Which Host headers are accepted.
#[derive(Debug, Clone)]
pub enum HostCheck {
    /// Loopback: only these `host:port` values.
    Loopback(Vec<String>),
    /// Elsewhere the token guards every request; any Host is accepted.
    Any,
}

impl HostCheck {
    /// The check for a view listening at `local`.
    pub fn for_listener(local: SocketAddr) -> HostCheck {
        if !local.ip().is_loopback() {
            return HostCheck::Any;
        }
        let p = local.port();
        HostCheck::Loopback(vec![
            format!("127.0.0.1:{p}"),
            format!("localhost:{p}"),
            format!("[::1]:{p}"),
            local.to_string(),
        ])
    }

    /// True when a request with this Host header may be served.
    pub fn allows(&self, host: Option<&str>) -> bool {
        match self {
            HostCheck::Any => true,
            HostCheck::Loopback(ok) => {
                host.is_some_and(|h| ok.iter().any(|o| o.eq_ignore_ascii_case(h)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_exactly_and_short_ones_are_refused() {
        let t = Token::new("0123456789abcdef").unwrap();
        assert!(t.matches("0123456789abcdef"));
        assert!(!t.matches("0123456789abcdeF"));
        assert!(!t.matches(""));
        assert!(Token::new("short").is_err());
        assert!(Token::new("0123456789 abcdef").is_err());
    }

    #[test]
    fn the_token_is_found_in_header_query_or_cookie() {
        let none = std::iter::empty();
        assert_eq!(
            token_of(Some("Bearer abc"), None, none, "c").as_deref(),
            Some("abc")
        );
        let none = std::iter::empty();
        assert_eq!(
            token_of(None, Some("a=1&token=x%2By"), none, "c").as_deref(),
            Some("x+y")
        );
        let cookies = ["a=b; c=tok"].into_iter();
        assert_eq!(token_of(None, None, cookies, "c").as_deref(), Some("tok"));
        assert_eq!(token_of(None, None, std::iter::empty(), "c"), None);
    }

    #[test]
    fn percent_coding_round_trips_and_never_panics() {
        for s in ["", "a b", "%", "%4", "%zz", "ü/?&=", "%%41"] {
            assert_eq!(percent_decode(&percent_encode(s)), s);
            let _ = percent_decode(s);
        }
        assert_eq!(percent_decode("%41%4"), "A%4");
    }

    #[test]
    fn loopback_hosts_are_checked() {
        let c = HostCheck::for_listener("127.0.0.1:8080".parse().unwrap());
        assert!(c.allows(Some("127.0.0.1:8080")));
        assert!(c.allows(Some("LOCALHOST:8080")));
        assert!(!c.allows(Some("evil.example:8080")));
        assert!(!c.allows(None));
        assert!(HostCheck::for_listener("0.0.0.0:1".parse().unwrap()).allows(None));
    }
}
