//! Proves the store's basic contract: appended transitions survive reopen, a
//! refused transition writes nothing, compaction keeps the state, a second writer
//! is refused and readers see acknowledged state without a lock.
use crate::common;
use common::*;
use runlog::engine::{self, Error, RealFs, Store};

#[test]
fn appends_survive_reopen_in_both_codecs() {
    for codec in codecs() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("s");
        {
            let s = Store::<Ledger>::open(&dir, opts(codec)).unwrap();
            for v in 1..=100 {
                assert_eq!(s.append(&entry(v, 10)).unwrap(), v);
            }
        }
        let s = Store::<Ledger>::open(&dir, opts(codec)).unwrap();
        assert_eq!(
            s.read(|st| st.clone()),
            model(&(1..=100).collect::<Vec<_>>(), 10)
        );
        assert_eq!(s.recovery().records_replayed, 100);
        assert_eq!(s.append(&entry(101, 1)).unwrap(), 101);
    }
}

#[test]
fn refused_transition_writes_nothing() {
    for codec in codecs() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("s");
        let s = Store::<Ledger>::open(&dir, opts(codec)).unwrap();
        s.append(&entry(1, 3)).unwrap();
        let before = dir_bytes(&dir);
        let e = s.append(&entry(2000, 3)).unwrap_err();
        assert!(e.is_refused(), "{e}");
        assert_eq!(dir_bytes(&dir), before);
        assert_eq!(s.append(&entry(2, 3)).unwrap(), 2);
    }
}

#[test]
fn compaction_keeps_state_and_trims_log() {
    for codec in codecs() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("s");
        let mut o = opts(codec);
        o.segment_bytes = 4096;
        let s = Store::<Ledger>::open(&dir, o.clone()).unwrap();
        let mut all = vec![];
        for round in 0..3 {
            for v in 1..=200u64 {
                let v = round * 1000 + v;
                s.append(&entry(v, 20)).unwrap();
                all.push(v);
            }
            let r = s.compact().unwrap();
            assert_eq!(r.snapshot_seq, all.len() as u64);
        }
        drop(s);
        let s = Store::<Ledger>::open(&dir, o).unwrap();
        assert_eq!(s.read(|st| st.clone()), model(&all, 20));
        assert_eq!(s.recovery().snapshot_seq, Some(600));
        let (st, _) = engine::Reader::new(&RealFs, &dir)
            .state::<Ledger>()
            .unwrap();
        assert_eq!(st, model(&all, 20));
    }
}

#[test]
fn second_writer_is_refused_naming_the_holder() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("s");
    let _s = Store::<Ledger>::open(&dir, opts(runlog::engine::Codec::Binary)).unwrap();
    match Store::<Ledger>::open(&dir, opts(runlog::engine::Codec::Binary)) {
        Err(Error::Locked {
            holder: Some(h), ..
        }) => assert!(h.contains(&std::process::id().to_string())),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("second writer got the lock"),
    }
}

#[test]
fn reader_sees_acknowledged_records_of_live_writer() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("s");
    let s = Store::<Ledger>::open(&dir, opts(runlog::engine::Codec::Jsonl)).unwrap();
    for v in 1..=10 {
        s.append(&entry(v, 1)).unwrap();
    }
    let before = dir_bytes(&dir);
    let (st, rep) = engine::Reader::new(&RealFs, &dir)
        .state::<Ledger>()
        .unwrap();
    assert_eq!(st.values, (1..=10).collect::<Vec<_>>());
    assert_eq!(rep.last_seq, 10);
    assert_eq!(dir_bytes(&dir), before);
}

#[test]
fn never_policy_acknowledges_without_fsync_and_sync_makes_durable() {
    use runlog::engine::SyncPolicy;
    use std::sync::atomic::Ordering;
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("s");
    let mut o = opts(runlog::engine::Codec::Binary);
    o.sync = SyncPolicy::Never;
    let s = Store::<Ledger>::open(&dir, o).unwrap();
    for v in 1..=50 {
        s.append(&entry(v, 1)).unwrap();
    }
    assert_eq!(s.stats().fsyncs.load(Ordering::Relaxed), 0);
    s.sync().unwrap();
    assert_eq!(s.stats().fsyncs.load(Ordering::Relaxed), 1);
}

#[test]
fn always_policy_fsyncs_every_sequential_append() {
    use std::sync::atomic::Ordering;
    let d = tempfile::tempdir().unwrap();
    let s = Store::<Ledger>::open(d.path().join("s"), opts(runlog::engine::Codec::Binary)).unwrap();
    for v in 1..=20 {
        s.append(&entry(v, 1)).unwrap();
    }
    assert_eq!(s.stats().fsyncs.load(Ordering::Relaxed), 20);
}

/// "A compaction is already running" is not an error: an explicit compaction
/// waits for the running one (explicit or background) and then runs its own.
/// Neither reports `Poisoned`, which is kept for a store whose write failed.
#[test]
fn compactions_that_overlap_wait_for_each_other() {
    for codec in codecs() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("s");
        let s = Store::<Ledger>::open(
            &dir,
            engine::Options {
                // Every append past the first starts a background compaction.
                compaction: engine::CompactionPolicy::Auto {
                    min_log_bytes: 1,
                    ratio: 0.0,
                },
                ..opts(codec)
            },
        )
        .unwrap();
        std::thread::scope(|scope| {
            let compactors: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        for _ in 0..20 {
                            s.compact().unwrap();
                        }
                    })
                })
                .collect();
            for v in 1..=60 {
                s.append(&entry(v, 2)).unwrap();
            }
            for c in compactors {
                c.join().unwrap();
            }
        });
        assert_eq!(s.last_compaction_error(), None, "{codec:?}");
        let c = s.compact().unwrap();
        assert_eq!(c.snapshot_seq, 60, "{codec:?}");
        assert_eq!(
            s.read(|st| st.clone()),
            model(&(1..=60).collect::<Vec<_>>(), 2)
        );
    }
}
