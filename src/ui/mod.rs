//! `runlog ui`: a read-only operator's view of a runs root in a browser.
//!
//! The server reads runs lock-free, as `runlog status` does, and never writes
//! into the runs root: any number of views may watch a live run beside its
//! writer. What each part owns:
//!
//! * [`auth`]: the token (constant-time check) and the Host check against DNS
//!   rebinding;
//! * [`assets`]: the page, its script and style, embedded in the binary, and
//!   the security headers (a strict Content-Security-Policy);
//! * [`feed`]: one watcher per open run, polling its header and counts and
//!   pushing a summary to every event stream when the log grows;
//! * [`lists`]: the long lists (blocked, retried, stuck, pending, eligible,
//!   held back), built by one streamed scan in the background, bounded;
//! * [`follow`]: blocked, retried, stuck and pending kept current from the
//!   log's tail after that scan, never rebuilt per request;
//! * [`output`]: a unit's output reference, where the cluster driver records one;
//! * [`fleet`]: the runs page, every run under the root;
//! * [`routes`]: the JSON API and the pages.
//!
//! Cost: a page and a live update read the run's header and counts only, so
//! they cost the same at 10 units and at 10M (docs/PERFORMANCE.md measures it).

pub mod assets;
pub mod auth;
pub mod feed;
pub mod fleet;
pub mod follow;
pub mod lists;
pub mod routes;

use runlog::run::{RunError, Runs};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// Where the view listens by default: loopback, a free port.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

/// How `runlog ui` serves.
#[derive(Debug, Clone)]
pub struct UiOptions {
    /// The address to listen on ([`DEFAULT_LISTEN`] by default).
    pub listen: SocketAddr,
    /// The token every request must carry (required off loopback).
    pub token: Option<String>,
    /// The run whose page the printed URL opens (the runs page when `None`).
    pub run: Option<String>,
}

/// A view bound to its address and ready to serve.
pub struct Bound {
    listener: std::net::TcpListener,
    state: Arc<routes::AppState>,
    url: String,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Checks the options and binds the address: a non-loopback address without
/// a token, or a token too short to guess at, is refused.
pub fn bind(runs: &Runs, opts: &UiOptions) -> Result<Bound, RunError> {
    let token = match &opts.token {
        Some(t) => Some(auth::Token::new(t)?),
        None => None,
    };
    if !opts.listen.ip().is_loopback() && token.is_none() {
        return Err(RunError::Invalid(format!(
            "listening on {} (not loopback) needs a token: anyone who reaches the address could read every run under the root",
            opts.listen
        )));
    }
    if let Some(run) = &opts.run {
        runlog::run::Runs::check_id(run).map_err(RunError::Invalid)?;
    }
    let listener = std::net::TcpListener::bind(opts.listen).map_err(|e| RunError::Io {
        op: "listen for the web view",
        path: opts.listen.to_string().into(),
        source: e,
    })?;
    let local = listener.local_addr().map_err(|e| RunError::Io {
        op: "read the listening address",
        path: opts.listen.to_string().into(),
        source: e,
    })?;
    listener.set_nonblocking(true).map_err(|e| RunError::Io {
        op: "set the listener non-blocking",
        path: local.to_string().into(),
        source: e,
    })?;
    let host = match local.ip() {
        ip if ip.is_unspecified() => "127.0.0.1".to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    let path = match &opts.run {
        Some(r) => format!("/run/{r}"),
        None => "/".to_string(),
    };
    let query = opts
        .token
        .as_ref()
        .map(|t| format!("?token={}", auth::percent_encode(t)))
        .unwrap_or_default();
    let url = format!("http://{host}:{}{path}{query}", local.port());
    let state = Arc::new(routes::AppState::new(
        runs.clone(),
        token,
        auth::HostCheck::for_listener(local),
        local.port(),
    ));
    Ok(Bound {
        listener,
        state,
        url,
    })
}

impl Bound {
    /// The URL to open (with the token, when there is one).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves until the process ends (or the server fails).
    pub fn serve(self) -> Result<(), RunError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("runlog-ui")
            .enable_all()
            .build()
            .map_err(|e| RunError::Io {
                op: "start the web view's runtime",
                path: "-".into(),
                source: e,
            })?;
        let addr = self.url.clone();
        rt.block_on(async move {
            let listener =
                tokio::net::TcpListener::from_std(self.listener).map_err(|e| RunError::Io {
                    op: "listen for the web view",
                    path: (&addr).into(),
                    source: e,
                })?;
            axum::serve(listener, routes::router(self.state))
                .await
                .map_err(|e| RunError::Io {
                    op: "serve the web view",
                    path: (&addr).into(),
                    source: e,
                })
        })
    }

    /// Serves on a thread of its own (for `runlog demo --ui`); returns at once.
    pub fn serve_in_background(self) -> Result<(), RunError> {
        std::thread::Builder::new()
            .name("runlog-ui".into())
            .spawn(move || {
                if let Err(e) = self.serve() {
                    eprintln!("runlog ui: {}", runlog::run::ErrorChain(&e));
                }
            })
            .map(drop)
            .map_err(|e| RunError::Io {
                op: "start the web view's thread",
                path: "-".into(),
                source: e,
            })
    }
}
