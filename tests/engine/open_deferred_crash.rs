//! Proves that one-shot changes through the deferred open (`Runs::change`) keep
//! the crash invariant on the simulated filesystem: at every operation boundary
//! of every change (accepted or refused), under each persistence model, a crash
//! leaves a run that a writer reopens without corruption, holding every change
//! acknowledged before the crash and only changes that were issued — also after
//! a change whose fdatasync failed, replayed from the page cache by the next.
use crate::common::{run_spec, unit_done};
use runlog::engine::Vfs;
use runlog::engine::sim::{Fault, FaultKind, Op, Persistence, SimFs};
use runlog::run::*;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Makes `root/runs` exist, durably, in the simulated filesystem.
fn sim_root(fs: &SimFs, root: &Path) {
    let mut at = PathBuf::from("/");
    for c in root.join("runs").components().skip(1) {
        at.push(c);
        fs.create_dir(&at).unwrap();
        fs.sync_dir(at.parent().unwrap()).unwrap();
    }
}

fn units_done(runs: &Runs) -> Result<Vec<String>, String> {
    let run = runs.open("r").map_err(|e| e.to_string())?;
    let doc = run.doc().map_err(|e| e.to_string())?;
    Ok(doc
        .units
        .iter()
        .filter(|(_, u)| u.status == UnitStatus::Done)
        .map(|(n, _)| n.clone())
        .collect())
}

#[test]
fn every_crash_during_one_shot_changes_recovers_every_acknowledged_change() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    for codec in [runlog::engine::Codec::Jsonl, runlog::engine::Codec::Binary] {
        for model in [
            Persistence::Ordered,
            Persistence::WeakDirs,
            Persistence::Weak,
        ] {
            let fs = SimFs::new();
            sim_root(&fs, &root);
            let runs = Runs::new(&root)
                .with_codec(codec)
                .with_vfs(Arc::new(fs.clone()));
            drop(runs.init(run_spec("r", 12)).unwrap());
            // (images, acknowledged changes when taken)
            let images: Arc<Mutex<Vec<(SimFs, usize)>>> = Arc::default();
            let acked = Arc::new(Mutex::new(0usize));
            {
                let (images, acked) = (images.clone(), acked.clone());
                let mut seed = 0u64;
                fs.observe(Some(Box::new(move |s, _, _| {
                    let a = *acked.lock().unwrap();
                    seed += 1;
                    for choice in s.outcomes(model, 6, seed) {
                        images.lock().unwrap().push((s.image(&choice), a));
                    }
                })));
            }
            let mut fsync_at = 0;
            for i in 0..10 {
                let start = fs.ops();
                if i == 5 {
                    // This change's fdatasync fails (fsyncgate: its pages are
                    // dropped from the disk but the cache still shows them); the
                    // next change's open replays it and must make it durable
                    // before any record claims it.
                    fs.inject(Some(Fault {
                        at: start + fsync_at,
                        kind: FaultKind::Eio,
                        persistent: false,
                    }));
                    assert!(
                        runs.change("r", unit_done(&format!("u{i}"))).is_err(),
                        "the fsync failed"
                    );
                    assert_eq!(fs.op_log()[(start + fsync_at) as usize], Op::Fsync);
                    assert_eq!(fs.faults_fired(), 1);
                    fs.inject(None);
                    continue;
                }
                runs.change("r", unit_done(&format!("u{i}"))).unwrap();
                if i == 4 {
                    // The change before the failing one (the first after init
                    // also writes the writers' sync state; later ones do not).
                    let log = fs.op_log();
                    fsync_at = log[start as usize..]
                        .iter()
                        .position(|o| *o == Op::Fsync)
                        .unwrap() as u64;
                }
                *acked.lock().unwrap() = i + 1;
                if i % 3 == 1 {
                    // Refused (no such item): writes no segment.
                    let refused = Change::Resolve {
                        id: "item-404".into(),
                        note: None,
                    };
                    assert!(runs.change("r", refused).is_err());
                }
            }
            fs.observe(None);
            let images = std::mem::take(&mut *images.lock().unwrap());
            assert!(images.len() > 50, "{model:?}: {} images", images.len());
            for (n, (img, acked)) in images.into_iter().enumerate() {
                let again = Runs::new(&root).with_codec(codec).with_vfs(Arc::new(img));
                let got = units_done(&again)
                    .unwrap_or_else(|e| panic!("{codec:?} {model:?} image {n}: {e}"));
                let k = got.len();
                assert!(
                    k >= acked && k <= 10,
                    "{codec:?} {model:?} image {n}: {k} done, {acked} acknowledged"
                );
                let want: Vec<String> = {
                    let mut v: Vec<String> = (0..k).map(|i| format!("u{i}")).collect();
                    v.sort();
                    v
                };
                assert_eq!(got, want, "{codec:?} {model:?} image {n}: a prefix");
            }
        }
    }
}
