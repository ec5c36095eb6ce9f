//! Many writer processes on one store (FORMAT.md §5.8), each a one-shot
//! writer with its own locks, on the simulated filesystem: a one-shot writer
//! under `SyncPolicy::Never` returns once its batch is written and the writer
//! lock released, and its `sync` is the shared fsync, so a test can put the
//! writers' steps in any order on one thread. "Killed" is `mem::forget`
//! after the write: the lock is already gone, the fsync never runs.
use crate::common;
use common::crash::*;
use common::*;
use runlog::engine::format::{SHARED_FILE, SHARED_SLOT_LEN};
use runlog::engine::sim::{Fault, FaultKind, Op, SimFs};
use runlog::engine::vfs::Vfs;
use runlog::engine::{Codec, Options, Store, SyncPolicy};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

fn one_shot(fs: &SimFs, codec: Codec, sync: SyncPolicy) -> Options {
    Options {
        one_shot: true,
        sync,
        ..sim_opts(fs, codec)
    }
}

/// A store holding value 1, closed cleanly.
fn store_with_one(codec: Codec) -> SimFs {
    let fs = SimFs::new();
    let s = Store::<Ledger>::open(dir(), sim_opts(&fs, codec)).unwrap();
    s.append(&entry(1, 10)).unwrap();
    drop(s);
    fs
}

/// Writes `value` as a one-shot writer that then dies before its fsync.
fn killed_after_write(fs: &SimFs, codec: Codec, value: u64) {
    let a = Store::<Ledger>::open(dir(), one_shot(fs, codec, SyncPolicy::Never)).unwrap();
    a.append(&entry(value, 10)).unwrap();
    std::mem::forget(a);
}

fn ops_since(fs: &SimFs, from: usize) -> Vec<Op> {
    fs.op_log()[from..].to_vec()
}

fn count(ops: &[Op], op: Op) -> usize {
    ops.iter().filter(|o| **o == op).count()
}

fn durable_values(fs: &SimFs, codec: Codec) -> Vec<u64> {
    let img = fs.crash(&[]);
    recover(&img, codec, None)
        .unwrap_or_else(|e| panic!("{codec:?}: the durable image does not recover: {e}"))
        .0
        .values
}

#[test]
fn one_fsync_acknowledges_every_batch_written_before_it() {
    for codec in codecs() {
        let fs = store_with_one(codec);
        let writers: Vec<Store<Ledger>> = (2..=4)
            .map(|v| {
                let w =
                    Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Never)).unwrap();
                assert_eq!(w.append(&entry(v, 10)).unwrap(), v);
                w
            })
            .collect();
        let from = fs.op_log().len();
        // The first writer's fsync reaches the last record appended before it.
        for w in &writers {
            w.sync().unwrap();
        }
        assert_eq!(count(&ops_since(&fs, from), Op::Fsync), 1, "{codec:?}");
        let fsynced: Vec<(u64, u64)> = writers
            .iter()
            .map(|w| {
                let s = w.stats();
                (
                    s.fsyncs.load(std::sync::atomic::Ordering::Relaxed),
                    s.fsyncs_covered.load(std::sync::atomic::Ordering::Relaxed),
                )
            })
            .collect();
        assert_eq!(fsynced, [(1, 0), (0, 1), (0, 1)], "{codec:?}");
        drop(writers);
        assert_eq!(durable_values(&fs, codec), [1, 2, 3, 4], "{codec:?}");
    }
}

#[test]
fn a_one_shot_writer_lets_the_lock_go_before_its_fsync_and_appends_no_more() {
    for codec in codecs() {
        let fs = store_with_one(codec);
        let a = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Never)).unwrap();
        a.append(&entry(2, 10)).unwrap();
        // Its batch is written, its fsync not yet run: another writer opens,
        // appends and is acknowledged meanwhile.
        let b = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Always)).unwrap();
        assert_eq!(b.read(|s| s.values.clone()), [1, 2]);
        assert_eq!(b.append(&entry(3, 10)).unwrap(), 3);
        let again = a.append(&entry(9, 10)).unwrap_err();
        assert!(
            again
                .to_string()
                .contains("one-shot writer appends one batch"),
            "{again}"
        );
        // b's fsync covered a's record: a's own finds it under the mark.
        let from = fs.op_log().len();
        a.sync().unwrap();
        assert_eq!(count(&ops_since(&fs, from), Op::Fsync), 0, "{codec:?}");
        drop((a, b));
        assert_eq!(durable_values(&fs, codec), [1, 2, 3], "{codec:?}");
    }
}

#[test]
fn a_killed_writers_record_is_made_durable_by_the_next_writer_without_a_copy() {
    for codec in codecs() {
        let fs = store_with_one(codec);
        killed_after_write(&fs, codec, 2);
        let from = fs.op_log().len();
        let b = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Always)).unwrap();
        assert_eq!(b.append(&entry(3, 10)).unwrap(), 3);
        drop(b);
        let ops = ops_since(&fs, from);
        assert_eq!(count(&ops, Op::Rename), 0, "{codec:?}: copied: {ops:?}");
        assert_eq!(count(&ops, Op::Fsync), 1, "{codec:?}: {ops:?}");
        assert_eq!(durable_values(&fs, codec), [1, 2, 3], "{codec:?}");
    }
}

/// What `SHARED` is made to hold before the next writer opens.
enum Damage {
    Bit(usize),
    Cut(usize),
    Removed,
    Stale(Vec<u8>),
}

#[test]
fn every_damage_to_the_shared_file_makes_the_next_writer_copy_and_acknowledge_only_durably() {
    let shared = dir().join(SHARED_FILE);
    for codec in codecs() {
        // SHARED as it was before the killed writer's record: a valid file
        // that says less than the log.
        let stale = {
            let fs = store_with_one(codec);
            fs.get(&shared).expect("the first writer wrote SHARED")
        };
        let len = 2 * SHARED_SLOT_LEN;
        assert_eq!(stale.len(), len);
        let mut cases: Vec<Damage> = (0..len * 8).map(Damage::Bit).collect();
        cases.extend((0..len).map(Damage::Cut));
        cases.push(Damage::Removed);
        cases.push(Damage::Stale(stale));
        let total = cases.len();
        for case in cases {
            let fs = store_with_one(codec);
            killed_after_write(&fs, codec, 2);
            let mut bytes = fs.get(&shared).unwrap();
            let what = match case {
                Damage::Bit(i) => {
                    bytes[i / 8] ^= 1 << (i % 8);
                    fs.put(&shared, bytes);
                    format!("bit {i} flipped")
                }
                Damage::Cut(n) => {
                    bytes.truncate(n);
                    fs.put(&shared, bytes);
                    format!("cut to {n} bytes")
                }
                Damage::Removed => {
                    fs.remove(&shared).unwrap();
                    "removed".into()
                }
                Damage::Stale(old) => {
                    fs.put(&shared, old);
                    "stale".into()
                }
            };
            let from = fs.op_log().len();
            let b = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Always))
                .unwrap_or_else(|e| panic!("{codec:?} {what}: open: {e}"));
            assert_eq!(
                b.append(&entry(3, 10))
                    .unwrap_or_else(|e| panic!("{codec:?} {what}: {e}")),
                3
            );
            drop(b);
            // Nothing vouched for the killed writer's record: copied.
            assert_eq!(
                count(&ops_since(&fs, from), Op::Rename),
                1,
                "{codec:?} {what}"
            );
            assert_eq!(durable_values(&fs, codec), [1, 2, 3], "{codec:?} {what}");
        }
        eprintln!("many_writers: {codec:?}: {total} damaged SHARED files, each copied");
    }
}

#[test]
fn a_failed_fsync_refuses_every_writer_it_covered_until_an_open_copies() {
    for codec in codecs() {
        // Two writers have written; the first to sync fails its fdatasync.
        let run = |fs: &SimFs, fault: Option<u64>| {
            let a = Store::<Ledger>::open(dir(), one_shot(fs, codec, SyncPolicy::Never)).unwrap();
            a.append(&entry(2, 10)).unwrap();
            let b = Store::<Ledger>::open(dir(), one_shot(fs, codec, SyncPolicy::Never)).unwrap();
            b.append(&entry(3, 10)).unwrap();
            let start = fs.ops();
            if let Some(at) = fault {
                fs.inject(Some(Fault {
                    at: start + at,
                    kind: FaultKind::Eio,
                    persistent: false,
                }));
            }
            let ra = a.sync();
            fs.inject(None);
            let fsync_at = fs.op_log()[start as usize..]
                .iter()
                .position(|o| *o == Op::Fsync)
                .map(|i| i as u64);
            let from = fs.op_log().len();
            let rb = b.sync();
            let b_fsyncs = count(&ops_since(fs, from), Op::Fsync);
            std::mem::forget((a, b));
            (ra, rb, fsync_at, b_fsyncs)
        };
        let twin = store_with_one(codec);
        let (_, _, at, _) = run(&twin, None);
        let at = at.expect("a's sync fsyncs");
        let fs = store_with_one(codec);
        let (ra, rb, _, b_fsyncs) = run(&fs, Some(at));
        assert_eq!(fs.faults_fired(), 1, "{codec:?}");
        assert!(ra.is_err(), "{codec:?}: a's fsync failed");
        let rb = rb.unwrap_err().to_string();
        assert!(rb.contains("failed in another writer"), "{codec:?}: {rb}");
        assert_eq!(b_fsyncs, 0, "{codec:?}: b must not fsync over lost pages");
        // The next open copies the segment and is acknowledged durably.
        let from = fs.op_log().len();
        let c = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Always)).unwrap();
        assert_eq!(c.append(&entry(4, 10)).unwrap(), 4);
        drop(c);
        assert_eq!(count(&ops_since(&fs, from), Op::Rename), 1, "{codec:?}");
        let values = durable_values(&fs, codec);
        assert_eq!(values.last(), Some(&4), "{codec:?}: {values:?}");
        assert_eq!(
            values,
            [1, 2, 3, 4],
            "{codec:?}: the copy keeps what the cache showed"
        );
    }
}

#[test]
fn a_one_shot_writer_replays_without_the_lock_and_catches_up_under_it() {
    // a's record fits its segment (read under the lock from where b's replay
    // ended), or rotates it (b replays again under the lock).
    for (codec, pad, caught_up) in [
        (Codec::Binary, 10, 1),
        (Codec::Jsonl, 10, 1),
        (Codec::Binary, 5000, 0),
        (Codec::Jsonl, 5000, 0),
    ] {
        let fs = store_with_one(codec);
        // a holds the writer lock from its open to its write.
        let a = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Always)).unwrap();
        let b = std::thread::spawn({
            let fs = fs.clone();
            move || {
                let opts = Options {
                    lock_wait: Some(std::time::Duration::from_secs(30)),
                    ..one_shot(&fs, codec, SyncPolicy::Always)
                };
                // Its replay runs now, beside a; its lock waits for a's write.
                let b = Store::<Ledger>::open(dir(), opts).unwrap();
                let caught = b.recovery().records_caught_up;
                (
                    b.append(&entry(3, 10)).unwrap(),
                    caught,
                    b.read(|s| s.values.clone()),
                )
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(a.append(&entry(2, pad)).unwrap(), 2);
        let (seq, caught, values) = b.join().unwrap();
        assert_eq!((seq, caught), (3, caught_up), "{codec:?} pad {pad}");
        assert_eq!(values, [1, 2, 3], "{codec:?}");
        drop(a);
        assert_eq!(durable_values(&fs, codec), [1, 2, 3], "{codec:?}");
    }
}

#[test]
fn a_syncer_killed_during_its_fsync_makes_the_next_refuse_and_the_next_open_copy() {
    use runlog::engine::writers::{decode_sync_state, encode_sync_state};
    let shared = dir().join(SHARED_FILE);
    for codec in codecs() {
        let fs = store_with_one(codec);
        let a = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Never)).unwrap();
        a.append(&entry(2, 10)).unwrap();
        // What a writer killed between its "in flight" write and its fsync's
        // end leaves: the flag set, the sync lock free (its holder is gone).
        let mut bytes = fs.get(&shared).unwrap();
        let slot = SHARED_SLOT_LEN..2 * SHARED_SLOT_LEN;
        let mut state = decode_sync_state(&bytes[slot.clone()]).unwrap();
        state.in_flight = true;
        bytes[slot].copy_from_slice(&encode_sync_state(&state));
        fs.put(&shared, bytes);
        let from = fs.op_log().len();
        let e = a.sync().unwrap_err().to_string();
        assert!(e.contains("died during it"), "{codec:?}: {e}");
        assert_eq!(count(&ops_since(&fs, from), Op::Fsync), 0, "{codec:?}");
        std::mem::forget(a);
        let from = fs.op_log().len();
        let b = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Always)).unwrap();
        assert_eq!(b.append(&entry(3, 10)).unwrap(), 3);
        drop(b);
        assert_eq!(
            count(&ops_since(&fs, from), Op::Rename),
            1,
            "{codec:?}: copied"
        );
        assert_eq!(durable_values(&fs, codec), [1, 2, 3], "{codec:?}");
    }
}

#[test]
fn a_long_lived_writer_syncs_alone_once_its_fsync_covered_every_other_writers_record() {
    for codec in codecs() {
        let fs = store_with_one(codec);
        // A one-shot writer's record waits above the mark, its fsync to come.
        killed_after_write(&fs, codec, 2);
        let s = Store::<Ledger>::open(dir(), sim_opts(&fs, codec)).unwrap();
        let from = fs.op_log().len();
        assert_eq!(s.append(&entry(3, 10)).unwrap(), 3);
        let first = ops_since(&fs, from);
        assert_eq!(count(&first, Op::TryLock), 1, "{codec:?}: {first:?}");
        // It holds the writer lock itself: no appender to wait for.
        assert_eq!(count(&first, Op::LockProbe), 0, "{codec:?}: {first:?}");
        assert_eq!(count(&first, Op::Fsync), 1, "{codec:?}: {first:?}");
        // Covered: records 2 and 3 are durable, and from now on this writer
        // is the only syncer: no sync lock, no read or write of SHARED.
        assert_eq!(durable_values(&fs, codec), [1, 2, 3], "{codec:?}");
        let from = fs.op_log().len();
        for v in 4..=8 {
            s.append(&entry(v, 10)).unwrap();
        }
        let rest = ops_since(&fs, from);
        assert_eq!(count(&rest, Op::TryLock), 0, "{codec:?}: {rest:?}");
        assert_eq!(count(&rest, Op::Read), 0, "{codec:?}: {rest:?}");
        assert_eq!(count(&rest, Op::Fsync), 5, "{codec:?}: {rest:?}");
        // Each fsync's record and its mark: two writes, nothing else.
        assert_eq!(count(&rest, Op::Write), 10, "{codec:?}: {rest:?}");
        assert_eq!(
            durable_values(&fs, codec),
            [1, 2, 3, 4, 5, 6, 7, 8],
            "{codec:?}"
        );
        drop(s);
    }
}

#[test]
fn a_long_lived_writer_that_has_appended_nothing_yet_still_syncs_under_the_lock() {
    for codec in codecs() {
        let fs = store_with_one(codec);
        killed_after_write(&fs, codec, 2);
        let s = Store::<Ledger>::open(dir(), sim_opts(&fs, codec)).unwrap();
        // A sync of nothing of its own covers the one-shot writer's record
        // under the sync lock, and does not make this writer the only syncer.
        let from = fs.op_log().len();
        s.sync().unwrap();
        s.append(&entry(3, 10)).unwrap();
        let ops = ops_since(&fs, from);
        assert_eq!(count(&ops, Op::TryLock), 2, "{codec:?}: {ops:?}");
        assert_eq!(durable_values(&fs, codec), [1, 2, 3], "{codec:?}");
        drop(s);
    }
}

#[test]
fn a_failed_fsync_of_a_writer_syncing_alone_acknowledges_nothing_and_the_next_open_copies() {
    for codec in codecs() {
        let fs = store_with_one(codec);
        let s = Store::<Ledger>::open(dir(), sim_opts(&fs, codec)).unwrap();
        s.append(&entry(2, 10)).unwrap();
        // Alone now; its next fsync fails.
        let start = fs.ops();
        let from = fs.op_log().len();
        fs.inject(Some(Fault {
            at: start + 1,
            kind: FaultKind::Eio,
            persistent: false,
        }));
        let err = s.append(&entry(3, 10)).unwrap_err().to_string();
        fs.inject(None);
        assert_eq!(fs.faults_fired(), 1, "{codec:?}");
        assert_eq!(
            fs.op_log()[from..].iter().position(|o| *o == Op::Fsync),
            Some(1),
            "{codec:?}: the fault is the fsync's"
        );
        assert!(err.contains("fsync"), "{codec:?}: {err}");
        // The failure was written to SHARED under the sync lock: the sync
        // state's *failed* (slot 1, byte 44; FORMAT.md §5.8) is 1.
        let ops = ops_since(&fs, from);
        assert_eq!(count(&ops, Op::TryLock), 1, "{codec:?}: {ops:?}");
        let shared = fs.get(&dir().join(SHARED_FILE)).unwrap();
        assert_eq!(shared[SHARED_SLOT_LEN + 44], 1, "{codec:?}: {shared:?}");
        assert!(s.append(&entry(4, 10)).is_err(), "{codec:?}: poisoned");
        drop(s);
        // The next writer goes on from what was acknowledged; the refused
        // record 4 was never written.
        let c = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Always)).unwrap();
        c.append(&entry(5, 10)).unwrap();
        drop(c);
        let values = durable_values(&fs, codec);
        assert_eq!(&values[..2], [1, 2], "{codec:?}: {values:?}");
        assert_eq!(values.last(), Some(&5), "{codec:?}: {values:?}");
        assert!(!values.contains(&4), "{codec:?}: {values:?}");
    }
}

/// Runs `act` at the first look at the writer lock (`Vfs::lock_busy`), as
/// another process would act between that look and the next.
fn at_first_probe(fs: &SimFs, act: impl FnOnce() + Send + 'static) {
    let act = Mutex::new(Some(act));
    fs.on_lock_probe(Some(Box::new(move || {
        if let Some(act) = act.lock().unwrap().take() {
            act();
        }
    })));
}

#[test]
fn a_syncer_waits_for_the_writer_mid_append_and_one_fsync_covers_both_batches() {
    for codec in codecs() {
        let fs = store_with_one(codec);
        let a = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Never)).unwrap();
        a.append(&entry(2, 10)).unwrap();
        // b's open holds the writer lock (it is catching up) when a, under
        // the sync lock, looks at it; b appends 3 and lets it go before a
        // looks again.
        let b = Arc::new(
            Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Never)).unwrap(),
        );
        let b_appends = {
            let b = b.clone();
            move || assert_eq!(b.append(&entry(3, 10)).unwrap(), 3)
        };
        let b_appended = Arc::new(AtomicBool::new(false));
        {
            let done = b_appended.clone();
            at_first_probe(&fs, move || {
                b_appends();
                done.store(true, Ordering::SeqCst);
            });
        }
        let from = fs.op_log().len();
        a.sync().unwrap();
        assert!(
            b_appended.load(Ordering::SeqCst),
            "{codec:?}: a's fsync never looked at the writer lock"
        );
        // a's one fsync covered b's batch: b acknowledges under the mark.
        b.sync().unwrap();
        let ops = ops_since(&fs, from);
        assert_eq!(count(&ops, Op::Fsync), 1, "{codec:?}: {ops:?}");
        assert_eq!(a.stats().fsyncs.load(Ordering::Relaxed), 1, "{codec:?}");
        assert_eq!(b.stats().fsyncs.load(Ordering::Relaxed), 0, "{codec:?}");
        assert_eq!(
            b.stats().fsyncs_covered.load(Ordering::Relaxed),
            1,
            "{codec:?}"
        );
        fs.on_lock_probe(None);
        drop((a, b));
        assert_eq!(durable_values(&fs, codec), [1, 2, 3], "{codec:?}");
    }
}

#[test]
fn a_syncer_waits_only_a_bounded_time_for_a_long_lived_writer_that_never_lets_go() {
    for codec in codecs() {
        let fs = store_with_one(codec);
        let a = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Never)).unwrap();
        a.append(&entry(2, 10)).unwrap();
        // A long-lived writer holds the writer lock until it closes, and
        // publishes no appended position: a's wait for it ends at its bound,
        // and its record 3, appended meanwhile, waits for its own fsync.
        let l = Arc::new(
            Store::<Ledger>::open(
                dir(),
                Options {
                    sync: SyncPolicy::Never,
                    ..sim_opts(&fs, codec)
                },
            )
            .unwrap(),
        );
        {
            let l = l.clone();
            at_first_probe(&fs, move || {
                assert_eq!(l.append(&entry(3, 10)).unwrap(), 3);
            });
        }
        let from = fs.op_log().len();
        a.sync().unwrap();
        let probes = count(&ops_since(&fs, from), Op::LockProbe);
        assert!(probes > 1, "{codec:?}: looked {probes} times");
        // The mark covers only a's record: l's fsync is its own.
        l.sync().unwrap();
        let ops = ops_since(&fs, from);
        assert_eq!(count(&ops, Op::Fsync), 2, "{codec:?}: {ops:?}");
        fs.on_lock_probe(None);
        drop((a, l));
        assert_eq!(durable_values(&fs, codec), [1, 2, 3], "{codec:?}");
    }
}

#[test]
fn a_syncer_finding_the_writer_lock_free_looks_once_and_reads_shared_no_more() {
    for codec in codecs() {
        let fs = store_with_one(codec);
        let a = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Never)).unwrap();
        a.append(&entry(2, 10)).unwrap();
        let from = fs.op_log().len();
        a.sync().unwrap();
        let ops = ops_since(&fs, from);
        assert_eq!(count(&ops, Op::LockProbe), 1, "{codec:?}: {ops:?}");
        assert_eq!(count(&ops, Op::Fsync), 1, "{codec:?}: {ops:?}");
        drop(a);
        assert_eq!(durable_values(&fs, codec), [1, 2], "{codec:?}");
    }
}
