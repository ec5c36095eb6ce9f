//! The pages and the JSON API, and the guard in front of all of them.
//!
//! | path | what |
//! |---|---|
//! | `/`, `/run/{id}` | the page (the script reads the path) |
//! | `/assets/{name}` | the script and the style |
//! | `/api/runs` | the runs page's data (fleet.rs) |
//! | `/api/runs/{id}` | one run's summary (feed.rs) |
//! | `/api/runs/{id}/events` | the same summary, pushed as the log grows (server-sent events) |
//! | `/api/runs/{id}/lists/{list}?page=N` | a page of one list (lists.rs) |
//! | `/api/runs/{id}/unit?name=U` | one unit by lookup |
//!
//! Every run id is checked with [`runlog::run::Runs::check_id`] before it is
//! joined to the root, so no request reaches outside `<root>/runs/`. Nothing
//! here writes: runs are read lock-free.

// A handler's early exit is its response: returned once per request, so its
// size (axum's `Response`) costs nothing worth boxing for.
#![allow(clippy::result_large_err)]

use super::assets;
use super::auth::{HostCheck, Token, cookie_name, token_of};
use super::feed::Watchers;
use super::fleet::Fleet;
use super::lists::{self, Kind};
use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use runlog::run::{RunError, Runs};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// What every handler shares.
pub struct AppState {
    runs: Runs,
    token: Option<Token>,
    hosts: HostCheck,
    cookie: String,
    watchers: Watchers,
    fleet: Arc<Fleet>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("runs", &self.runs)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// The state of a view of `runs`, guarded by `token` and `hosts`.
    pub fn new(runs: Runs, token: Option<Token>, hosts: HostCheck, port: u16) -> AppState {
        AppState {
            watchers: Watchers::new(runs.clone()),
            runs,
            token,
            hosts,
            cookie: cookie_name(port),
            fleet: Arc::new(Fleet::default()),
        }
    }
}

type Shared = State<Arc<AppState>>;

/// The router: pages, assets and API behind the guard.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/run/{id}", get(run_page))
        .route("/assets/{name}", get(asset))
        .route("/api/runs", get(api_runs))
        .route("/api/runs/{id}", get(api_run))
        .route("/api/runs/{id}/events", get(api_events))
        .route("/api/runs/{id}/lists/{list}", get(api_list))
        .route("/api/runs/{id}/unit", get(api_unit))
        .fallback(|| async { plain(StatusCode::NOT_FOUND, "not found") })
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

fn plain(code: StatusCode, text: &str) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text.to_string(),
    )
        .into_response()
}

fn json_text(text: impl Into<String>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        text.into(),
    )
        .into_response()
}

fn json_error(code: StatusCode, why: &str) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({ "error": why }).to_string(),
    )
        .into_response()
}

/// An error as a response: refusals 400, an unknown run 404, others 500.
fn error_response(e: &RunError) -> Response {
    let why = runlog::run::ErrorChain(e).to_string();
    let code = match e {
        RunError::NotFound { .. } => StatusCode::NOT_FOUND,
        e if e.is_refused() => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    json_error(code, &why)
}

fn checked_id(id: &str) -> Result<(), Response> {
    Runs::check_id(id)
        .map_err(|why| json_error(StatusCode::BAD_REQUEST, &format!("refused: {why}")))
}

/// Host check, token check, security headers; sets the token cookie when
/// the request carried the token some other way.
async fn guard(State(st): Shared, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    let mut resp = if !st.hosts.allows(host) {
        plain(
            StatusCode::MISDIRECTED_REQUEST,
            "refused: this view answers only to the loopback address it listens on (Host header)",
        )
    } else {
        let mut set_cookie = None;
        let allowed = match &st.token {
            None => true,
            Some(t) => {
                let h = req.headers();
                let auth = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
                let cookies = h
                    .get_all(header::COOKIE)
                    .iter()
                    .filter_map(|v| v.to_str().ok());
                let given = token_of(auth, req.uri().query(), cookies, &st.cookie);
                let ok = given.as_deref().is_some_and(|g| t.matches(g));
                if ok {
                    set_cookie = given;
                }
                ok
            }
        };
        if allowed {
            let mut r = next.run(req).await;
            if let Some(tok) = set_cookie {
                let c = format!(
                    "{}={}; Path=/; HttpOnly; SameSite=Strict",
                    st.cookie,
                    super::auth::percent_encode(&tok)
                );
                if let Ok(v) = HeaderValue::from_str(&c) {
                    r.headers_mut().insert(header::SET_COOKIE, v);
                }
            }
            r
        } else {
            plain(
                StatusCode::UNAUTHORIZED,
                "refused: this view needs its token: open the URL `runlog ui` printed (…?token=…), or send Authorization: Bearer TOKEN",
            )
        }
    };
    for (k, v) in assets::SECURITY_HEADERS {
        resp.headers_mut().insert(k, HeaderValue::from_static(v));
    }
    resp
}

async fn index() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        assets::INDEX_HTML,
    )
        .into_response()
}

async fn run_page(Path(id): Path<String>) -> Response {
    if let Err(why) = Runs::check_id(&id) {
        return plain(StatusCode::BAD_REQUEST, &format!("refused: {why}"));
    }
    index().await
}

async fn asset(Path(name): Path<String>) -> Response {
    match assets::asset(&name) {
        Some((ty, body)) => ([(header::CONTENT_TYPE, ty)], body).into_response(),
        None => plain(StatusCode::NOT_FOUND, "not found"),
    }
}

async fn api_runs(State(st): Shared) -> Response {
    match st.fleet.get(&st.runs).await {
        Ok(text) => json_text(text.as_str()),
        Err(e) => error_response(&e),
    }
}

/// The watcher of run `id`, started off the async threads (it reads the run).
async fn watcher(st: &Arc<AppState>, id: &str) -> Result<Arc<super::feed::Watcher>, Response> {
    checked_id(id)?;
    let (st2, id2) = (st.clone(), id.to_string());
    tokio::task::spawn_blocking(move || st2.watchers.get(&id2))
        .await
        .map_err(|e| json_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()))?
        .map_err(|e| error_response(&e))
}

async fn api_run(State(st): Shared, Path(id): Path<String>) -> Response {
    match watcher(&st, &id).await {
        Ok(w) => json_text(w.latest().as_str()),
        Err(r) => r,
    }
}

async fn api_events(State(st): Shared, Path(id): Path<String>) -> Response {
    let w = match watcher(&st, &id).await {
        Ok(w) => w,
        Err(r) => return r,
    };
    let rx = w.subscribe();
    let stream = futures::stream::unfold((rx, true), |(mut rx, first)| async move {
        if !first && rx.changed().await.is_err() {
            return None;
        }
        let text = rx.borrow_and_update().clone();
        let ev = Event::default().event("summary").data(text.as_str());
        Some((Ok::<_, Infallible>(ev), (rx, false)))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

async fn api_list(
    State(st): Shared,
    Path((id, list)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some(kind) = Kind::parse(&list) else {
        return json_error(
            StatusCode::NOT_FOUND,
            &format!(
                "refused: no list {list:?}; the lists are {}",
                lists::KINDS.map(Kind::name).join(", ")
            ),
        );
    };
    let page = match q.get("page").map(|p| p.parse::<usize>()) {
        None => 0,
        Some(Ok(p)) if p < 1_000_000 => p,
        Some(_) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                "refused: page must be a number from 0",
            );
        }
    };
    let w = match watcher(&st, &id).await {
        Ok(w) => w,
        Err(r) => return r,
    };
    let Some(l) = w.lists() else {
        return json_text(
            serde_json::json!({"list": kind.name(), "scanning": true, "entries": [], "total": null})
                .to_string(),
        );
    };
    let mut v = l.page(kind, page);
    if kind == Kind::HeldBack {
        // The roots behind each shown entry, by lookup in the run as it is now.
        let (runs, id2, entries) = (st.runs.clone(), id.clone(), v["entries"].clone());
        let roots =
            tokio::task::spawn_blocking(move || -> Result<Vec<serde_json::Value>, RunError> {
                let read = runs.read_run(&id2)?;
                let view = read.view();
                let mut out = vec![];
                for e in entries.as_array().into_iter().flatten() {
                    let deps: Vec<String> = e["openDeps"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|d| d.as_str().map(String::from))
                        .collect();
                    let (r, cut) = lists::blocking_roots(&view, &deps)?;
                    out.push(serde_json::json!({"roots": r, "walkCut": cut}));
                }
                Ok(out)
            })
            .await;
        match roots {
            Ok(Ok(r)) => {
                if let Some(es) = v["entries"].as_array_mut() {
                    for (e, r) in es.iter_mut().zip(r) {
                        e["roots"] = r["roots"].clone();
                        e["rootsWalkCut"] = r["walkCut"].clone();
                    }
                }
            }
            Ok(Err(e)) => return error_response(&e),
            Err(e) => return json_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        }
    }
    json_text(v.to_string())
}

async fn api_unit(
    State(st): Shared,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = checked_id(&id) {
        return r;
    }
    let Some(name) = q.get("name").cloned() else {
        return json_error(
            StatusCode::BAD_REQUEST,
            "refused: give the unit's name: ?name=UNIT",
        );
    };
    if name.is_empty() || name.len() > runlog::run::Change::MAX_NAME_BYTES {
        return json_error(
            StatusCode::BAD_REQUEST,
            &format!(
                "refused: a unit name is 1–{} bytes",
                runlog::run::Change::MAX_NAME_BYTES
            ),
        );
    }
    let runs = st.runs.clone();
    let r = tokio::task::spawn_blocking(move || -> Result<serde_json::Value, RunError> {
        let read = runs.read_run(&id)?;
        let view = read.view();
        let Some(u) = view.unit(&name)? else {
            return Ok(serde_json::json!({"name": name, "found": false}));
        };
        let (roots, cut) = if u.status == runlog::run::UnitStatus::Done {
            (vec![], false)
        } else {
            lists::blocking_roots(&view, &u.depends_on)?
        };
        let output = u.output();
        Ok(serde_json::json!({
            "name": name, "found": true, "outputRef": output, "unit": u,
            "blockingRoots": roots, "rootsWalkCut": cut,
            "seq": read.recovery().last_seq,
        }))
    })
    .await;
    match r {
        Ok(Ok(v)) => json_text(v.to_string()),
        Ok(Err(e)) => error_response(&e),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}
