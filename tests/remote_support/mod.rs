//! Shared by the tests/remote/remote_*.rs modules: a machine whose state is the list of
//! every value appended (so "nothing acknowledged lost" is checked exactly), a
//! fault-injecting `ObjectStore`, and the gateway environment check.
#![allow(dead_code)]

// The benches' delay proxy, the same file (issue 50).
#[path = "../../bench/src/delay_proxy.rs"]
pub mod delay_proxy;
pub mod gate_store;
pub mod held_store;

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use runlog::engine::{Machine, Options, Store};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// State: every value appended, in order.
pub struct Log;

#[derive(Debug)]
pub struct Never;
impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("never")
    }
}
impl std::error::Error for Never {}

impl Machine for Log {
    type State = Vec<u64>;
    type Transition = u64;
    type Error = Never;
    fn apply(s: &mut Vec<u64>, t: &u64) -> Result<(), Never> {
        s.push(*t);
        Ok(())
    }
}

pub fn open(dir: &std::path::Path) -> Store<Log> {
    Store::<Log>::open(
        dir,
        Options {
            create: true,
            ..Options::default()
        },
    )
    .unwrap()
}

pub fn read(dir: &std::path::Path) -> Vec<u64> {
    runlog::engine::Reader::new(&runlog::engine::RealFs, dir)
        .state::<Log>()
        .unwrap()
        .0
}

/// Two writers on two local copies claim one run at the same moment; exactly
/// one must win. A first writer ships value 1 under `tmp/a`; copies `x` and `y`
/// are restored from the remote; each opens its copy, claims (through
/// `remote()`, under `config`) after a common barrier, appends 10 or 20 and
/// closes. Checks that one won and the loser is fenced naming an epoch of at
/// least 2, and that a restore holds 1 and the winner's value; returns the
/// winner's value. `round` names the attempt in failure messages.
pub fn two_claimers_one_wins(
    tmp: &std::path::Path,
    remote: impl Fn() -> Result<runlog::remote::Remote, runlog::remote::RemoteError>
    + Clone
    + Send
    + 'static,
    config: &runlog::remote::RemoteConfig,
    round: usize,
) -> u64 {
    use runlog::remote::{RemoteError, Replication, restore};
    let first_local = open(&tmp.join("a"));
    let first = Replication::start(&first_local, remote().unwrap(), config).unwrap();
    first.append(&first_local, &1).unwrap();
    first.close().unwrap();
    let dirs: Vec<_> = ["x", "y"]
        .iter()
        .map(|n| {
            let d = tmp.join(n);
            restore(&runlog::engine::RealFs, &remote().unwrap(), &d, None).unwrap();
            d
        })
        .collect();
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let handles: Vec<_> = dirs
        .into_iter()
        .zip([10u64, 20])
        .map(|(d, value)| {
            let (remote, barrier, config) = (remote.clone(), barrier.clone(), config.clone());
            std::thread::spawn(move || {
                let s = open(&d);
                barrier.wait();
                let r = Replication::start(&s, remote()?, &config)?;
                r.append(&s, &value)?;
                r.close()?;
                Ok::<u64, RemoteError>(value)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<u64> = results
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    assert_eq!(winners.len(), 1, "round {round}: {results:?}");
    // The loser is fenced, naming the winner's newer epoch, whether it lost the
    // claim race, was fenced at its first append, or claimed after the winner
    // shipped (its copy is behind the chain).
    let loser = results.iter().find_map(|r| r.as_ref().err()).unwrap();
    assert!(
        matches!(loser, RemoteError::Fenced { newer, .. } if *newer >= 2),
        "round {round}: the loser is fenced: {results:?}"
    );
    assert!(loser.to_string().contains("epoch"), "{loser}");
    let c = tmp.join("c");
    restore(&runlog::engine::RealFs, &remote().unwrap(), &c, None).unwrap();
    assert_eq!(read(&c), vec![1, winners[0]], "round {round}");
    winners[0]
}

/// What the faulty store does to the N-th call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Fails it without doing it.
    Fail,
    /// Does it, then reports a failure (the response was lost).
    DropResponse,
}

/// Wraps a store; the call numbered `at` (1-based, every kind of call counted)
/// suffers `fault`. `calls` counts every call, `puts` the PUTs among them.
#[derive(Debug)]
pub struct Faulty {
    pub inner: Arc<dyn ObjectStore>,
    pub calls: AtomicU64,
    pub puts: AtomicU64,
    pub at: u64,
    pub fault: Fault,
}

impl std::fmt::Display for Faulty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

fn injected() -> object_store::Error {
    object_store::Error::Generic {
        store: "Faulty",
        source: "injected fault".into(),
    }
}

impl Faulty {
    pub fn new(inner: Arc<dyn ObjectStore>, at: u64, fault: Fault) -> Faulty {
        Faulty {
            inner,
            calls: AtomicU64::new(0),
            puts: AtomicU64::new(0),
            at,
            fault,
        }
    }

    /// Some(fault) when this call is the chosen one.
    fn tick(&self) -> Option<Fault> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        (n == self.at).then_some(self.fault)
    }
}

#[async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        match self.tick() {
            Some(Fault::Fail) => Err(injected()),
            Some(Fault::DropResponse) => {
                let _ = self.inner.put_opts(location, payload, opts).await;
                Err(injected())
            }
            None => self.inner.put_opts(location, payload, opts).await,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        match self.tick() {
            Some(_) => Err(injected()),
            None => self.inner.get_opts(location, options).await,
        }
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        match self.tick() {
            Some(Fault::Fail) => Box::pin(futures::stream::once(async { Err(injected()) })),
            _ => self.inner.delete_stream(locations),
        }
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        match self.tick() {
            Some(_) => Box::pin(futures::stream::once(async { Err(injected()) })),
            None => self.inner.list(prefix),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// One gateway serves every Ceph test of this binary, and the outage test stops
/// it mid-run: tests that use it hold this lock shared, the outage test holds it
/// alone, so no test meets a gateway another test took away.
static GATEWAY_IN_USE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A test's hold on the gateway: kept for the whole test (bind it to a named
/// variable, not `_`).
pub enum GatewayUse {
    /// Shared with the other tests that use the gateway.
    Shared(#[allow(dead_code)] std::sync::RwLockReadGuard<'static, ()>),
    /// Alone: this test may stop and start the gateway.
    Alone(#[allow(dead_code)] std::sync::RwLockWriteGuard<'static, ()>),
}

/// The gateway's bucket and a shared hold on it, or `None` after printing why
/// the test skips. With RUNLOG_REQUIRE_S3=1 a missing gateway fails the test instead.
pub fn gateway(test: &str) -> Option<(String, GatewayUse)> {
    let bucket = bucket(test)?;
    let hold = GATEWAY_IN_USE.read().unwrap_or_else(|p| p.into_inner());
    Some((bucket, GatewayUse::Shared(hold)))
}

/// As [`gateway`], holding the gateway alone (for a test that stops it).
pub fn gateway_alone(test: &str) -> Option<(String, GatewayUse)> {
    let bucket = bucket(test)?;
    let hold = GATEWAY_IN_USE.write().unwrap_or_else(|p| p.into_inner());
    Some((bucket, GatewayUse::Alone(hold)))
}

fn bucket(test: &str) -> Option<String> {
    let bucket = std::env::var("RUNLOG_S3_BUCKET").ok();
    let endpoint = std::env::var("AWS_ENDPOINT_URL").ok();
    match (bucket, endpoint) {
        (Some(b), Some(_)) => Some(b),
        _ => {
            crate::skip_support::skip(
                test,
                "RUNLOG_REQUIRE_S3",
                "no S3 gateway: AWS_ENDPOINT_URL / RUNLOG_S3_BUCKET are unset (scripts/test starts one as root; by hand: .ci/ceph.sh start, then source $CEPH_DIR/env)",
            );
            None
        }
    }
}

/// A fresh prefix URL in the gateway's bucket.
pub fn s3_url(bucket: &str, name: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("s3://{bucket}/{name}-{:016x}", h.finish())
}

/// Runs the `runlog` binary with `--dir root` and `args`.
pub fn runlog(root: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--dir")
        .arg(root)
        .args(args)
        .output()
        .unwrap()
}

/// The stdout of a command that must have succeeded (else its exit and stderr fail the test).
pub fn ok(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every file directly under `dir`, by name, with its bytes (two restores compared file for file).
pub fn files(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}
