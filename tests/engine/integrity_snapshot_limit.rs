//! Proves that the snapshot size limit is checked while encoding (issue 11,
//! item 9): a state whose snapshot would pass `Options::max_snapshot_len` is
//! refused with `Error::TooLarge` after encoding no more than the limit (the
//! encoder is stopped, counted item by item), nothing is installed, the store
//! goes on appending, and a background compaction's refusal is reported by
//! `Store::last_compaction_error`.
use runlog::engine::{CompactionPolicy, Error, Machine, Options, Store};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::atomic::{AtomicU64, Ordering};

/// Items serialized so far, by every `Count` state.
static SERIALIZED: AtomicU64 = AtomicU64::new(0);

/// A state of `n` one-byte items, serialized one at a time.
#[derive(Default, Debug, PartialEq)]
struct Count(u64);

impl Serialize for Count {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0 as usize))?;
        for _ in 0..self.0 {
            SERIALIZED.fetch_add(1, Ordering::Relaxed);
            seq.serialize_element(&7u8)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        Ok(Count(Vec::<u8>::deserialize(d)?.len() as u64))
    }
}

struct Grow;
#[derive(Debug)]
struct Never;
impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("never")
    }
}
impl std::error::Error for Never {}
impl Machine for Grow {
    type State = Count;
    type Transition = u64;
    type Error = Never;
    fn apply(s: &mut Count, t: &u64) -> Result<(), Never> {
        s.0 += t;
        Ok(())
    }
}

const LIMIT: u64 = 4096;

fn opts(compaction: CompactionPolicy) -> Options {
    Options {
        create: true,
        compaction,
        max_snapshot_len: LIMIT,
        ..Options::default()
    }
}

fn snapshots(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("snap-"))
        .collect()
}

#[test]
fn a_state_over_the_limit_is_refused_while_encoding_and_nothing_is_installed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let s = Store::<Grow>::open(&dir, opts(CompactionPolicy::Manual)).unwrap();
    s.append(&100).unwrap();
    s.compact().expect("a small state compacts");
    assert_eq!(snapshots(&dir).len(), 1);
    // A million items: the encoder must stop near the limit, not at the end.
    s.append(&1_000_000).unwrap();
    SERIALIZED.store(0, Ordering::Relaxed);
    let e = s.compact().expect_err("over the limit");
    assert!(matches!(e, Error::TooLarge { max: LIMIT, .. }), "{e}");
    assert!(
        runlog::engine::ErrorChain(&e)
            .to_string()
            .contains("snapshot"),
        "{}",
        runlog::engine::ErrorChain(&e)
    );
    let encoded = SERIALIZED.load(Ordering::Relaxed);
    assert!(
        encoded <= 2 * LIMIT,
        "encoded {encoded} items past a {LIMIT}-byte limit"
    );
    // Nothing installed, no temp left, and the store goes on.
    assert_eq!(snapshots(&dir).len(), 1, "{:?}", snapshots(&dir));
    s.append(&1).unwrap();
    assert_eq!(s.read(|c| c.0), 1_000_101);
    drop(s);
    let s = Store::<Grow>::open(&dir, opts(CompactionPolicy::Manual)).unwrap();
    assert_eq!(s.read(|c| c.0), 1_000_101);
}

#[test]
fn a_background_compaction_over_the_limit_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let s = Store::<Grow>::open(
        &dir,
        opts(CompactionPolicy::Auto {
            min_log_bytes: 1,
            ratio: 0.0,
        }),
    )
    .unwrap();
    assert_eq!(s.last_compaction_error(), None);
    s.append(&1_000_000).unwrap();
    s.append(&1).unwrap();
    // `compact` waits for the background one first; then it fails the same way.
    let e = s.compact().expect_err("over the limit");
    assert!(matches!(e, Error::TooLarge { .. }), "{e}");
    let bg = s
        .last_compaction_error()
        .expect("the background compaction's error");
    assert!(
        bg.contains("snapshot") && bg.contains(&LIMIT.to_string()),
        "{bg}"
    );
}
