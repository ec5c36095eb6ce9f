//! A remote: an object store, a prefix inside it, and the one small tokio
//! runtime the remote layer owns. Every call blocks the calling thread (from
//! async code too: there the call runs on a thread of its own); the
//! engine and the run model stay synchronous. URLs: `s3://bucket/prefix`
//! (endpoint and credentials from the standard `AWS_*` environment, as
//! `object_store` reads them) and `file:///path`.

use super::error::{RemoteError, Result};
use super::layout::{
    INLINE_MAX_BYTES, INLINE_ROUND_MAX, MAX_INLINE_LEN, MAX_ROUNDS_IN_FLIGHT, ROUNDS_IN_FLIGHT,
};
type Bytes = Vec<u8>;
use futures::TryStreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How many times `object_store` retries one request (transient errors only).
pub const REQUEST_RETRIES: usize = 3;
/// The longest one request (with its retries) may take before it fails.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// A restore's GETs in flight at once (issue 50): on a store 30 ms away,
/// eight requests hide the round trips of chunks and snapshot behind each
/// other's transfer.
pub const READ_AHEAD_REQUESTS: usize = 8;
/// The bytes of objects a restore holds fetched (or being fetched) and not
/// yet checked, counted by the lengths its manifest lists: 256 MiB, four
/// chunks of the 64 MiB a writer cuts. An object larger than this is fetched
/// alone, so a restore holds at most `max(READ_AHEAD_BYTES, its largest
/// object)` of downloads (1 GiB for a chunk, 4 GiB for a snapshot at most).
pub const READ_AHEAD_BYTES: u64 = 256 << 20;

pub(super) fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("runlog-remote")
            .enable_all()
            .build()
            .map_err(|e| format!("start the remote I/O runtime: {e}"))
    })
    .as_ref()
    .map_err(|e| RemoteError::Config(e.clone()))
}

/// What a create-only put found.
#[derive(Debug, PartialEq, Eq)]
pub enum Put {
    /// The object was created by this call.
    Created,
    /// An object already had that name: nothing was written.
    Exists,
}

/// A remote run location.
#[derive(Clone)]
pub struct Remote {
    pub(super) store: Arc<dyn ObjectStore>,
    prefix: String,
    url: String,
    /// When set, every call fails once this instant passes (and the
    /// duration it was set for, for the message).
    deadline: Option<(Instant, Duration)>,
    /// An S3 remote opened with no credentials in the environment: what a
    /// credentials failure adds to its message.
    credentials_hint: Option<&'static str>,
    /// What a ship round may carry inline in its manifest: (new bytes of one
    /// round, bytes held by one manifest); see [`Remote::with_inline_limits`].
    inline_limits: (u64, u64),
    /// What a restore keeps in flight: (requests, bytes); see
    /// [`Remote::with_read_ahead`].
    pub(super) read_ahead: (usize, u64),
    /// Manifest PUTs a writer keeps in flight; see [`Remote::with_rounds_in_flight`].
    pub(super) rounds_in_flight: u64,
}

/// What an S3 remote's credentials failure says when the environment holds
/// none: without them the AWS client asks the EC2 instance metadata service
/// (169.254.169.254), whose refusal names nothing the user set.
const NO_CREDENTIALS: &str = "no AWS credentials in the environment: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL for an S3 server other than AWS); without them the S3 client asked the EC2 instance metadata service";

/// [`NO_CREDENTIALS`] when none of the variables the S3 client reads its
/// credentials from is set.
fn credentials_hint() -> Option<&'static str> {
    const VARS: [&str; 4] = [
        "AWS_ACCESS_KEY_ID",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ];
    let set = VARS
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    (!set).then_some(NO_CREDENTIALS)
}

/// A store error with what the user can do about it in front.
#[derive(Debug)]
struct Hinted {
    hint: &'static str,
    source: object_store::Error,
}

impl std::fmt::Display for Hinted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.hint)
    }
}

impl std::error::Error for Hinted {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// True when `e`'s causes speak of credentials or the instance metadata service.
fn is_credentials_failure(e: &object_store::Error) -> bool {
    let mut text = String::new();
    let mut cur: Option<&dyn std::error::Error> = Some(e);
    while let Some(c) = cur {
        text.push_str(&c.to_string().to_lowercase());
        text.push(' ');
        cur = c.source();
    }
    [
        "169.254.169.254",
        "/latest/api/token",
        "/latest/meta-data",
        "credential",
    ]
    .iter()
    .any(|w| text.contains(w))
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Remote({})", self.url)
    }
}

impl Remote {
    /// Opens `s3://bucket/prefix` or `file:///path` (created if missing).
    pub fn open(url: &str) -> Result<Remote> {
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(RemoteError::Config(format!(
                    "remote URL {url:?} names no bucket"
                )));
            }
            let retry = object_store::RetryConfig {
                max_retries: REQUEST_RETRIES,
                retry_timeout: REQUEST_TIMEOUT,
                ..Default::default()
            };
            // Timeouts through config keys: `with_client_options` would replace
            // what the environment set (AWS_ALLOW_HTTP among them).
            use object_store::ClientConfigKey as C;
            use object_store::aws::AmazonS3ConfigKey as K;
            let s3 = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_retry(retry)
                .with_config(
                    K::Client(C::Timeout),
                    format!("{}s", REQUEST_TIMEOUT.as_secs()),
                )
                .with_config(K::Client(C::ConnectTimeout), "5s")
                .build()
                .map_err(|e| RemoteError::store("configure S3 remote", url, e))?;
            let mut r = Remote::with_store(Arc::new(s3), prefix, url)?;
            r.credentials_hint = credentials_hint();
            Ok(r)
        } else if let Some(path) = url.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(RemoteError::Config(format!(
                    "remote URL {url:?}: a file remote needs an absolute path (file:///dir)"
                )));
            }
            std::fs::create_dir_all(path).map_err(|e| {
                RemoteError::Config(format!("create file remote directory {path}: {e}"))
            })?;
            let fs = object_store::local::LocalFileSystem::new_with_prefix(path)
                .map_err(|e| RemoteError::store("open file remote", url, e))?
                .with_fsync(true);
            Remote::with_store(Arc::new(fs), "", url)
        } else {
            Err(RemoteError::Config(format!(
                "remote URL {url:?}: expected s3://bucket/prefix or file:///path"
            )))
        }
    }

    /// A remote over any object store (tests use `InMemory` and fault wrappers).
    pub fn with_store(store: Arc<dyn ObjectStore>, prefix: &str, url: &str) -> Result<Remote> {
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == "." || p == "..") {
            return Err(RemoteError::Config(format!(
                "remote prefix {prefix:?} has . or .."
            )));
        }
        Ok(Remote {
            store,
            prefix: prefix.to_string(),
            url: url.to_string(),
            deadline: None,
            credentials_hint: None,
            inline_limits: (INLINE_ROUND_MAX, INLINE_MAX_BYTES),
            read_ahead: (READ_AHEAD_REQUESTS, READ_AHEAD_BYTES),
            rounds_in_flight: ROUNDS_IN_FLIGHT,
        })
    }

    /// This remote with a deadline `within` from now: a call still waiting
    /// for the store then is dropped (its request cancelled, no thread left
    /// behind) and fails with a `Store` error saying no answer came within
    /// `within`. For reads that must not stall their caller (`status`).
    pub fn with_deadline(mut self, within: Duration) -> Remote {
        self.deadline = Some((Instant::now() + within, within));
        self
    }

    /// This remote with other limits for records carried inline in a
    /// manifest (FORMAT.md §13.4 step 2): a round whose new frames are at
    /// most `round` bytes, with the manifest then holding at most `total`,
    /// writes one object; else it uploads a chunk first. `total` is capped at
    /// 1 MiB (what a reader accepts); 0 turns inlining off.
    /// Defaults: 32 KiB a round, 64 KiB in all (FORMAT.md §13.4).
    pub fn with_inline_limits(mut self, round: u64, total: u64) -> Remote {
        self.inline_limits = (round, total.min(MAX_INLINE_LEN));
        self
    }

    /// This remote with another read-ahead for restore and `verify
    /// --remote`: at most `requests` GETs in flight (at least 1: then one
    /// object after the other, as before issue 50), holding at most `bytes`
    /// of objects fetched and not yet checked (FORMAT.md §13.5).
    /// Defaults: [`READ_AHEAD_REQUESTS`], [`READ_AHEAD_BYTES`].
    pub fn with_read_ahead(mut self, requests: usize, bytes: u64) -> Remote {
        self.read_ahead = (requests.max(1), bytes);
        self
    }

    /// This remote with another number of ship rounds (manifest PUTs) a
    /// writer keeps in flight at once (FORMAT.md §13.4), from 1 (one round
    /// trip after another, as before issue 50) to 8 (`MAX_ROUNDS_IN_FLIGHT`,
    /// which readers rely on). Default 4.
    pub fn with_rounds_in_flight(mut self, rounds: u64) -> Remote {
        self.rounds_in_flight = rounds.clamp(1, MAX_ROUNDS_IN_FLIGHT);
        self
    }

    /// `(round, total)`: see [`Remote::with_inline_limits`].
    pub fn inline_limits(&self) -> (u64, u64) {
        self.inline_limits
    }

    /// Runs `f` on the remote runtime, cut short at the deadline, if any.
    ///
    /// Called from a thread that is running async code (a caller's own tokio
    /// runtime: `block_on` there would panic), the future runs on a scoped
    /// thread of its own, and this thread waits for it: the call blocks, as
    /// every call of this API does, but never panics.
    pub(super) fn block_on<T: Send>(
        &self,
        f: impl std::future::Future<Output = std::result::Result<T, object_store::Error>> + Send,
    ) -> Result<std::result::Result<T, object_store::Error>> {
        let rt = runtime()?;
        let run = move || match self.deadline {
            None => rt.block_on(f),
            Some((at, within)) => rt
                .block_on(async { tokio::time::timeout_at(at.into(), f).await })
                .unwrap_or_else(|_| {
                    Err(object_store::Error::Generic {
                        store: DEADLINE_STORE,
                        source: format!("no answer within {}", deadline_text(within)).into(),
                    })
                }),
        };
        let r = if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|s| match s.spawn(run).join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            })
        } else {
            run()
        };
        Ok(r.map_err(|e| match self.credentials_hint {
            Some(hint) if is_credentials_failure(&e) => object_store::Error::Generic {
                store: "S3",
                source: Box::new(Hinted { hint, source: e }),
            },
            _ => e,
        }))
    }

    /// The URL it was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub(super) fn path(&self, rel: &str) -> ObjPath {
        if self.prefix.is_empty() {
            ObjPath::from(rel)
        } else {
            ObjPath::from(format!("{}/{rel}", self.prefix))
        }
    }

    fn show(&self, rel: &str) -> String {
        format!("{}/{rel}", self.url.trim_end_matches('/'))
    }

    /// Writes `bytes` as `rel` only if no object has that name (`If-None-Match: *`).
    pub fn put_create(&self, op: &'static str, rel: &str, bytes: Vec<u8>) -> Result<Put> {
        self.put_create_shared(op, rel, bytes::Bytes::from(bytes))
    }

    /// [`Remote::put_create`] of shared bytes (a table's file, mapped or
    /// read): the request holds them, uncopied, and so may the caller.
    pub(crate) fn put_create_shared(
        &self,
        op: &'static str,
        rel: &str,
        bytes: bytes::Bytes,
    ) -> Result<Put> {
        let path = self.path(rel);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        let r = self.block_on(self.store.put_opts(&path, PutPayload::from(bytes), opts))?;
        match r {
            Ok(_) => Ok(Put::Created),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(Put::Exists),
            Err(e) => Err(RemoteError::store(op, self.show(rel), e)),
        }
    }

    /// Reads `rel`; `None` when it does not exist. Refuses an object longer than `max_len`.
    pub fn get(&self, op: &'static str, rel: &str, max_len: u64) -> Result<Option<Bytes>> {
        let r = self.block_on(fetch(self.store.clone(), self.path(rel), max_len))?;
        self.answer(op, rel, max_len, r)
    }

    /// What [`fetch`]'s outcome for `rel` means to a caller of [`Remote::get`].
    pub(super) fn answer(
        &self,
        op: &'static str,
        rel: &str,
        max_len: u64,
        r: Fetched,
    ) -> Result<Option<Bytes>> {
        match r {
            Ok(Ok(b)) => Ok(Some(b)),
            Ok(Err(size)) => Err(RemoteError::corrupt(
                self.show(rel),
                None,
                format!("{size} bytes, more than the {max_len} allowed"),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(RemoteError::store(op, self.show(rel), e)),
        }
    }

    /// The names (relative to the prefix) of the objects under folder `dir`, sorted.
    pub fn list(&self, op: &'static str, dir: &str) -> Result<Vec<String>> {
        let path = self.path(dir);
        let r: std::result::Result<Vec<_>, _> =
            self.block_on(self.store.list(Some(&path)).try_collect())?;
        let metas = r.map_err(|e| RemoteError::store(op, self.show(dir), e))?;
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        let mut names: Vec<String> = metas
            .into_iter()
            .filter_map(|m| m.location.as_ref().strip_prefix(&strip).map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Deletes `rel` (absent already is fine).
    pub fn delete(&self, op: &'static str, rel: &str) -> Result<()> {
        let path = self.path(rel);
        match self.block_on(self.store.delete(&path))? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(RemoteError::store(op, self.show(rel), e)),
        }
    }
}

/// One GET's outcome: the bytes, or `Err(size)` for an object longer than
/// allowed (not downloaded), or the store's error.
pub(super) type Fetched = std::result::Result<std::result::Result<Bytes, u64>, object_store::Error>;

/// Reads `path` from `store` unless it is longer than `max_len`: the one
/// request behind [`Remote::get`] and the read-ahead of a restore.
pub(super) async fn fetch(store: Arc<dyn ObjectStore>, path: ObjPath, max_len: u64) -> Fetched {
    let g = store.get(&path).await?;
    if g.meta.size > max_len {
        return Ok(Err(g.meta.size));
    }
    // `Vec::from` takes over a buffer the body owns alone (no second copy
    // of a table-sized object while the first is alive).
    g.bytes().await.map(|b| Ok(Vec::from(b)))
}

/// The `store` of the error a call past its deadline fails with.
const DEADLINE_STORE: &str = "remote deadline";

/// Whether `e` is a call cut short by [`Remote::with_deadline`].
pub fn is_deadline(e: &RemoteError) -> bool {
    matches!(
        e,
        RemoteError::Store {
            source: object_store::Error::Generic { store, .. },
            ..
        } if *store == DEADLINE_STORE
    )
}

/// `within` as status shows it: `2s`, `500ms`.
pub fn deadline_text(within: Duration) -> String {
    if within.subsec_millis() == 0 {
        format!("{}s", within.as_secs())
    } else {
        format!("{}ms", within.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 21: the client's blocking calls panicked ("Cannot start a
    /// runtime from within a runtime") when made from async code, as an
    /// embedder's tokio service would. From a current-thread and a
    /// multi-thread runtime, and with a deadline, they now run and answer.
    #[test]
    fn blocking_calls_from_inside_a_callers_runtime_answer_instead_of_panicking() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let current = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        for (i, rt) in [current, multi].iter().enumerate() {
            let url = url.clone();
            let got = rt.block_on(async move {
                let r = Remote::open(&url).unwrap();
                let name = format!("obj-{i}");
                assert_eq!(
                    r.put_create("put", &name, b"x".to_vec()).unwrap(),
                    Put::Created
                );
                assert_eq!(
                    r.put_create("put", &name, b"y".to_vec()).unwrap(),
                    Put::Exists
                );
                let r = r.with_deadline(Duration::from_secs(30));
                (
                    r.get("get", &name, 16).unwrap(),
                    r.list("list", "").unwrap(),
                )
            });
            assert_eq!(got.0.as_deref(), Some(&b"x"[..]));
            assert!(
                got.1.iter().any(|n| n.ends_with(&format!("obj-{i}"))),
                "{:?}",
                got.1
            );
        }
    }
}
