//! An `ObjectStore` whose GETs answer out of order, on purpose: the GET of
//! the object named `first` is held until the GETs of every object in
//! `after` have been answered (or 30 s pass: a reader that never asks for
//! them in parallel then shows in `order`, not in a hang), and every other
//! GET waits a few milliseconds that vary with its name. Records the order
//! answers left it and the most GETs it ever had in flight.

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Held {
    pub inner: Arc<dyn ObjectStore>,
    /// The object whose GET is held (a path relative to the store's root).
    pub first: String,
    /// The objects whose GETs must be answered before `first`'s.
    pub after: Vec<String>,
    /// Every GET's object, in the order it was answered.
    pub order: Mutex<Vec<String>>,
    in_flight: AtomicUsize,
    /// The most GETs in flight at once.
    pub max_in_flight: AtomicUsize,
}

impl Held {
    pub fn new(inner: Arc<dyn ObjectStore>, first: String, after: Vec<String>) -> Held {
        Held {
            inner,
            first,
            after,
            order: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        }
    }

    fn answered(&self) -> Vec<String> {
        self.order.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Held({})", self.inner)
    }
}

/// 0–7 ms, from the name's bytes.
fn jitter(name: &str) -> Duration {
    let h = name
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    Duration::from_millis(h % 8)
}

#[async_trait]
impl ObjectStore for Held {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
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
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let name = location.as_ref().to_string();
        if name == self.first {
            let until = Instant::now() + Duration::from_secs(30);
            while Instant::now() < until {
                let done = self.answered();
                if self.after.iter().all(|a| done.contains(a)) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        } else {
            tokio::time::sleep(jitter(&name)).await;
        }
        let r = self.inner.get_opts(location, options).await;
        self.order
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(name);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        r
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
