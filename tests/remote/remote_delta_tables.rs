//! A keyed store's delta tables (FORMAT.md §14) ship with the full table under
//! them (§13.2 `deltas`, §13.4 step 1), so a shipped run keeps its writer's
//! overlay small: the restore holds the same state, every table of the chain
//! is fetched and checked, and a delta table missing, cut or flipped on the
//! remote fails the restore and `verify --remote` naming it, leaving no
//! directory behind.
#![cfg(feature = "remote")]

use object_store::ObjectStore;
use object_store::memory::InMemory;
use runlog::engine::{ApplyError, Keyed, KeyedMachine, KeyedState, Options, Reader, RealFs, Store};
use runlog::remote::{
    Policy, Remote, RemoteConfig, RemoteError, Replication, gc, latest_manifest, restore,
    verify_remote,
};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// Sets key `k<v % 50>` to `v`.
struct Map;

#[derive(Debug)]
struct Never;
impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("never")
    }
}
impl std::error::Error for Never {}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Count(u64);

impl KeyedMachine for Map {
    type Header = Count;
    type Value = u64;
    type Transition = u64;
    type Error = Never;

    fn apply(state: &mut KeyedState<Self>, t: &u64) -> Result<(), ApplyError<Never>> {
        state
            .put(&format!("k{:02}", t % 50), *t)
            .map_err(ApplyError::Damaged)?;
        state.header_mut().0 += 1;
        Ok(())
    }
}

fn open(dir: &Path) -> Store<Keyed<Map>> {
    Store::open(
        dir,
        Options {
            create: true,
            ..Options::default()
        },
    )
    .unwrap()
}

/// Every key's value and the header, as the store in `dir` holds them.
fn state(dir: &Path) -> (u64, Vec<(String, u64)>) {
    let (s, _) = Reader::new(&RealFs, dir).state::<Keyed<Map>>().unwrap();
    let entries = s
        .iter()
        .map(|e| e.map(|(k, v)| (k.into_owned(), v)))
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    (s.header().0, entries)
}

fn config() -> RemoteConfig {
    RemoteConfig::new("memory://run", Policy::Sync)
}

/// A full table at 100, a delta table at 150, then one at 200 (which, over
/// the full one, replaces the one at 150 locally), records after: shipped.
fn shipped(dir: &Path) -> Arc<dyn ObjectStore> {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let local = open(dir);
    let r = Replication::start(
        &local,
        Remote::with_store(inner.clone(), "run", "memory://run").unwrap(),
        &config(),
    )
    .unwrap();
    for v in 1..=230u64 {
        r.append(&local, &v).unwrap();
        match v {
            100 => drop(local.compact().unwrap()),
            150 | 200 => drop(local.flush().unwrap()),
            _ => {}
        }
    }
    r.close().unwrap();
    inner
}

#[test]
fn a_stores_delta_tables_ship_with_its_full_table_and_restore_to_the_same_state() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let inner = shipped(&a);
    let rem = Remote::with_store(inner, "run", "memory://run").unwrap();
    let head = latest_manifest(&rem).unwrap().unwrap();
    let seqs: Vec<u64> = head
        .snapshot
        .iter()
        .chain(&head.deltas)
        .map(|s| s.seq)
        .collect();
    assert_eq!(seqs, vec![100, 200], "the local chain: {head:?}");
    assert_eq!(head.shipped, 230);
    assert!(
        head.chunks.iter().all(|c| c.last > 200) && head.inline.iter().all(|r| r.last > 200),
        "what the tables cover left the live set: {head:?}"
    );
    // Each table went up once: a round reuses what the chain already holds.
    let tables = rem.list("test", "snapshots").unwrap();
    assert_eq!(
        tables.len(),
        3,
        "the tables at 100, 150 and 200: {tables:?}"
    );
    verify_remote(&RealFs, &rem, None).unwrap();
    let b = tmp.path().join("b");
    let report = restore(&RealFs, &rem, &b, None).unwrap();
    assert_eq!((report.snapshot, report.last_seq), (Some(200), 230));
    assert_eq!(state(&b), state(&a));
    assert_eq!(state(&b).0, 230);
    // gc keeps every table of the head's chain.
    gc(&rem, 1).unwrap();
    let c = tmp.path().join("c");
    restore(&RealFs, &rem, &c, None).unwrap();
    assert_eq!(state(&c), state(&a));
}

#[test]
fn a_delta_table_missing_cut_or_flipped_on_the_remote_fails_the_restore_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let inner = shipped(&tmp.path().join("a"));
    let rem = Remote::with_store(inner, "run", "memory://run").unwrap();
    let head = latest_manifest(&rem).unwrap().unwrap();
    assert!(!head.deltas.is_empty(), "{head:?}");
    for victim in &head.deltas {
        let good = rem.get("test", &victim.object, u64::MAX).unwrap().unwrap();
        let mut flipped = good.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x40;
        let cut = good[..good.len() - 1].to_vec();
        for (what, bytes) in [
            ("missing", None),
            ("cut", Some(cut)),
            ("flipped", Some(flipped)),
        ] {
            rem.delete("test", &victim.object).unwrap();
            if let Some(b) = bytes {
                rem.put_create("test", &victim.object, b).unwrap();
            }
            let t = tmp.path().join(format!("t-{}-{what}", victim.seq));
            let e = restore(&RealFs, &rem, &t, None).unwrap_err();
            let shown = runlog::engine::ErrorChain(&e).to_string();
            match what {
                "missing" => assert!(
                    matches!(e, RemoteError::Gap { to, .. } if to == victim.seq),
                    "{what} {}: {shown}",
                    victim.object
                ),
                "cut" => assert!(
                    shown.contains(&victim.object),
                    "{what}: names the object: {shown}"
                ),
                _ => assert!(
                    shown.contains(&format!("snap-{:020}", victim.seq))
                        || shown.contains(&victim.object),
                    "{what}: names the table: {shown}"
                ),
            }
            assert!(!t.exists(), "{what}: a failed restore leaves no directory");
            assert!(verify_remote(&RealFs, &rem, None).is_err(), "{what}");
            rem.delete("test", &victim.object).unwrap();
            rem.put_create("test", &victim.object, good.clone())
                .unwrap();
        }
    }
    verify_remote(&RealFs, &rem, None).unwrap();
}
