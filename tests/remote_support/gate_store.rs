//! An `ObjectStore` that holds manifest PUTs on purpose, as a network holds a
//! dead process's requests: while closed, every PUT under `manifest/` waits
//! (and is listed in `held`) until its name is released; each manifest PUT
//! may also take a fixed `delay`. Records the most manifest PUTs in flight at
//! once. Everything else passes straight through.

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Gate {
    pub inner: Arc<dyn ObjectStore>,
    delay: Duration,
    closed: AtomicBool,
    /// Manifest PUTs waiting at the closed gate, by object name.
    held: Mutex<BTreeSet<String>>,
    released: Mutex<BTreeSet<String>>,
    in_flight: AtomicUsize,
    /// The most manifest PUTs in flight at once.
    pub max_in_flight: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Gate {
    pub fn new(inner: Arc<dyn ObjectStore>, delay: Duration) -> Gate {
        Gate {
            inner,
            delay,
            closed: AtomicBool::new(false),
            held: Mutex::new(BTreeSet::new()),
            released: Mutex::new(BTreeSet::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        }
    }

    /// From now on manifest PUTs wait until released.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// The manifest PUTs waiting now.
    pub fn held(&self) -> BTreeSet<String> {
        lock(&self.held).clone()
    }

    /// Waits (up to 30 s) until `n` manifest PUTs wait at the gate; returns them.
    pub fn wait_held(&self, n: usize) -> BTreeSet<String> {
        let until = Instant::now() + Duration::from_secs(30);
        while self.held().len() < n && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        let held = self.held();
        assert_eq!(held.len(), n, "manifest PUTs held: {held:?}");
        held
    }

    /// Lets the held PUT of `name` go on (to the store, now).
    pub fn release(&self, name: &str) {
        lock(&self.released).insert(name.to_string());
    }

    /// Waits (up to 30 s) until no manifest PUT waits at the gate.
    pub fn wait_drained(&self) {
        let until = Instant::now() + Duration::from_secs(30);
        while !self.held().is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(self.held().is_empty(), "still held: {:?}", self.held());
    }
}

impl std::fmt::Display for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gate({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Gate {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let name = location.as_ref().to_string();
        if !name.contains("manifest/") {
            return self.inner.put_opts(location, payload, opts).await;
        }
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            lock(&self.held).insert(name.clone());
            while !lock(&self.released).contains(&name) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        tokio::time::sleep(self.delay).await;
        let r = self.inner.put_opts(location, payload, opts).await;
        lock(&self.held).remove(&name);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        r
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
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
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
