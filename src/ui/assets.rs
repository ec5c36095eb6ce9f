//! The page, its script and its style, embedded in the binary (no CDN: the
//! view works on a cluster with no way out), and the headers every response
//! carries. The script inserts everything that comes from a run (names,
//! notes, errors, items) with `textContent`, never as HTML, and the
//! Content-Security-Policy allows no inline script and nothing from
//! elsewhere, so a unit named `<script>…` is shown as text and cannot run.

/// The one page: the runs page and each run's page (the script reads the path).
pub const INDEX_HTML: &str = include_str!("assets/index.html");
/// The script.
pub const APP_JS: &str = include_str!("assets/app.js");
/// The style.
pub const APP_CSS: &str = include_str!("assets/app.css");

/// The Content-Security-Policy of every response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Headers on every response: the CSP and its companions.
pub const SECURITY_HEADERS: [(&str, &str); 5] = [
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cache-control", "no-store"),
];

/// An embedded asset by its path under `/assets/`: (content type, body).
pub fn asset(name: &str) -> Option<(&'static str, &'static str)> {
    match name {
        "app.js" => Some(("text/javascript; charset=utf-8", APP_JS)),
        "app.css" => Some(("text/css; charset=utf-8", APP_CSS)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_script_never_writes_html() {
        for bad in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!super::APP_JS.contains(bad), "app.js uses {bad}");
        }
        assert!(!super::INDEX_HTML.contains("<script>"), "inline script");
        assert!(!super::INDEX_HTML.contains("style="), "inline style");
    }
}
