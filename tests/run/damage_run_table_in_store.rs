//! Proves that damage to the newest table snapshot of a run's store (the run
//! model's units in a table, 300 units, both codecs) is never silent: every
//! 61st bit flipped (every bit position across the file; at the quick depth,
//! tests/depth, every 183rd from an offset drawn from the printed seed) and every 97th cut
//! either falls back LOUDLY (`snapshot_fallbacks` names the table; the run
//! equals the whole-document reference model), or fails the open with
//! `Corrupt` naming the table, or keeps the table and then every unit lookup
//! returns the reference's unit or a `Corrupt` naming the table, and `verify`
//! reports the block — never a unit missing or wrong.
use crate::common;
use crate::depth;
use common::*;
use runlog::engine::{self, Codec, Error, Integrity, Keyed, KeyedState, Machine, Store};
use runlog::run::{
    Change, InitSpec, RunDoc, RunKeyed, RunMachine, Transition, UnitStatus, clock::format_rfc3339,
};
use std::path::{Path, PathBuf};

const UNITS: usize = 300;
const T0: i64 = 1_764_547_200_000;

fn name(i: usize) -> String {
    format!("unit-{i:05}")
}

/// Init, then each unit started and half of them finished with a note.
fn changes() -> Vec<Change> {
    let mut cs = vec![Change::Init(InitSpec {
        id: "dmg".into(),
        task: "damage".into(),
        units: (0..UNITS).map(name).collect(),
        ..InitSpec::default()
    })];
    for i in 0..UNITS {
        cs.push(Change::Unit {
            unit: name(i),
            status: UnitStatus::InProgress,
            note: None,
            deps: None,
        });
    }
    for i in (0..UNITS).step_by(2) {
        cs.push(Change::Unit {
            unit: name(i),
            status: UnitStatus::Done,
            note: Some(format!("done {i}")),
            deps: None,
        });
    }
    cs
}

fn transition(i: usize, c: &Change) -> Transition {
    Transition {
        at: format_rfc3339(T0 + i as i64),
        change: c.clone(),
    }
}

type RStore = Store<Keyed<RunKeyed>>;

/// The store: compacted after the init, after the starts, then a tail of 10.
fn build(codec: Codec) -> (Vec<(String, Vec<u8>)>, RunDoc, String) {
    let fs = mem_fs();
    let s = RStore::open(Path::new(MEM_DIR), mem_opts(codec, &fs)).unwrap();
    let cs = changes();
    let mut doc = RunDoc::default();
    let tail_from = cs.len() - 10;
    for (i, c) in cs.iter().enumerate() {
        let t = transition(i, c);
        s.append(&t).unwrap();
        RunMachine::apply(&mut doc, &t).unwrap();
        if i == 0 || i == UNITS || i + 1 == tail_from {
            s.compact().unwrap();
        }
    }
    drop(s);
    let files = fs.files(Path::new(MEM_DIR));
    let newest = files
        .iter()
        .map(|f| f.0.clone())
        .filter(|n| n.ends_with(".snap"))
        .max()
        .unwrap();
    let table = &files.iter().find(|f| f.0 == newest).unwrap().1;
    assert_eq!(&table[..8], b"RUNLOGtb");
    (files, doc, newest)
}

/// The whole document a run state holds, read by iteration.
fn doc_of(st: &KeyedState<RunKeyed>) -> Result<RunDoc, String> {
    let mut doc = st.header().doc.clone();
    for e in st.iter() {
        let (k, r) = e.map_err(|e| e.to_string())?;
        doc.units.insert(k.into_owned(), r.to_unit());
    }
    Ok(doc)
}

#[derive(Debug, Default)]
struct Outcomes {
    fallbacks: u64,
    refused: u64,
    corrupt_at_lookup: u64,
}

fn check(
    (files, want, newest): (&[(String, Vec<u8>)], &RunDoc, &str),
    damaged: Vec<u8>,
    codec: Codec,
    what: &str,
    out: &mut Outcomes,
) {
    let fs = mem_fs();
    let dir = Path::new(MEM_DIR);
    let mut v = files.to_vec();
    v.iter_mut().find(|f| f.0 == newest).unwrap().1 = damaged;
    fs.set_files(dir, &v);
    let file: PathBuf = dir.join(newest);
    let s = match RStore::open(dir, mem_opts(codec, &fs)) {
        Ok(s) => s,
        Err(e) => {
            assert!(
                e.is_corrupt() && e.to_string().contains(&file.display().to_string()),
                "{what}: {e}"
            );
            out.refused += 1;
            return;
        }
    };
    if !s.recovery().snapshot_fallbacks.is_empty() {
        assert!(
            s.recovery()
                .snapshot_fallbacks
                .iter()
                .any(|(p, _)| p == &file),
            "{what}"
        );
        assert_eq!(&s.read(doc_of).unwrap(), want, "{what}");
        out.fallbacks += 1;
        return;
    }
    let mut errors = 0;
    s.read(|st| {
        assert_eq!(st.header().doc.id, want.id, "{what}");
        for (n, u) in &want.units {
            match st.get(n) {
                Ok(Some(r)) => assert_eq!(&r.to_unit(), u, "{what}: {n}"),
                Ok(None) => panic!("{what}: unit {n} silently missing"),
                Err(d) => {
                    assert!(
                        matches!(&d, Error::Corrupt { path, .. } if path == &file),
                        "{what}: {d}"
                    );
                    errors += 1;
                }
            }
        }
    });
    let whole = s.read(doc_of);
    drop(s);
    let v = engine::Reader::new(&fs, dir).verify().unwrap();
    if errors == 0 {
        // A flip no check can see would be a silent change: there is none.
        panic!(
            "{what}: damage passed every check ({:?}, {whole:?})",
            v.integrity
        );
    }
    assert!(whole.unwrap_err().contains(newest), "{what}");
    assert!(
        matches!(&v.integrity, Integrity::Damaged(Error::Corrupt { path, .. }) if path == &file),
        "{what}: {:?}",
        v.integrity
    );
    out.corrupt_at_lookup += 1;
}

/// Every 61st bit at the full depth; at the quick one, every
/// `RUNLOG_RUN_TABLE_FLIP_STRIDE`th (183, prime to 8 like 61: every bit
/// position is still met), from an offset drawn from the printed seed.
#[test]
fn damage_to_a_runs_newest_table_is_loud() {
    let stride = depth::scaled("RUNLOG_RUN_TABLE_FLIP_STRIDE", 183, 61).max(1) as usize;
    let seed = depth::sample_seed();
    let first = if depth::full() {
        0
    } else {
        (seed % stride as u64) as usize
    };
    let mut all_flips = 0;
    for codec in codecs() {
        let (files, want, newest) = build(codec);
        let table = files.iter().find(|f| f.0 == newest).unwrap().1.clone();
        let base = (&files[..], &want, newest.as_str());
        let mut out = Outcomes::default();
        for bit in (first..table.len() * 8).step_by(stride) {
            let mut d = table.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            check(base, d, codec, &format!("{codec:?} bit {bit}"), &mut out);
        }
        let flips = out.fallbacks + out.refused + out.corrupt_at_lookup;
        for len in (0..table.len()).step_by(97) {
            let before = out.fallbacks;
            check(
                base,
                table[..len].to_vec(),
                codec,
                &format!("{codec:?} cut at {len}"),
                &mut out,
            );
            assert_eq!(
                out.fallbacks,
                before + 1,
                "{codec:?} cut at {len} falls back"
            );
        }
        eprintln!(
            "{codec:?}: {} units, table of {} bytes, {flips} flips, {out:?}",
            UNITS,
            table.len()
        );
        assert!(out.fallbacks > 0 && out.refused + out.corrupt_at_lookup > 0);
        all_flips += flips;
    }
    depth::explored(
        "damage_run_table_in_store",
        format_args!(
            "{all_flips} bit flips of the run's table (2 codecs), 1 bit in {stride} from bit {first} (RUNLOG_SAMPLE_SEED={seed})"
        ),
    );
}

/// What a transition whose rules read the damaged table did.
#[derive(Debug, Default)]
struct AtApply {
    /// Refused as corruption naming the table, nothing written.
    corrupt: u64,
    /// The block it read was not the damaged one: accepted.
    accepted: u64,
}

/// Appends `t` to the store over `fs`, whose newest table is damaged: the
/// store either accepts it, or fails it as `Corrupt` naming `table` and writes
/// nothing. Never the rules' refusal: the rules did not refuse it, the state
/// they read was damaged.
fn append_over_damage(
    s: &RStore,
    fs: &SimFs,
    table: &Path,
    t: &Transition,
    what: &str,
    out: &mut AtApply,
) {
    let before = fs.files(Path::new(MEM_DIR));
    match s.append(t) {
        Ok(_) => out.accepted += 1,
        Err(e) => {
            assert!(
                matches!(&e, Error::Corrupt { path, .. } if path == table),
                "{what}: damage met by the rules must be corruption naming {}, got: {e}",
                table.display()
            );
            assert!(
                e.refusal::<runlog::run::RuleError>().is_none(),
                "{what}: {e}"
            );
            assert_eq!(
                fs.files(Path::new(MEM_DIR)),
                before,
                "{what}: a failed append wrote"
            );
            out.corrupt += 1;
        }
    }
}

/// A damaged block of a run's table met by the rules while they check a
/// transition is reported as the damage (`Corrupt`, naming the table), never as
/// the rules' refusal, and nothing is written: a unit's lookup (`unit … done`)
/// and the scan of the open units that closing the run as `needs_attention`
/// makes. (The scan once came back as a refusal, "the run's state could not be
/// read", exit 2 where damage exits 1.)
#[test]
fn damage_met_by_the_rules_is_corruption_not_a_refusal() {
    for codec in codecs() {
        let (files, _want, newest) = build(codec);
        let table = files.iter().find(|f| f.0 == newest).unwrap().1.clone();
        let file = Path::new(MEM_DIR).join(&newest);
        let (mut scans, mut lookups) = (AtApply::default(), AtApply::default());
        let at = files.len() + changes().len();
        for bit in (0..table.len() * 8).step_by(61 * 5) {
            let what = format!("{codec:?} bit {bit}");
            let mut d = table.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            let mut v = files.clone();
            v.iter_mut().find(|f| f.0 == newest).unwrap().1 = d;
            let fs = mem_fs();
            fs.set_files(Path::new(MEM_DIR), &v);
            let Ok(s) = RStore::open(Path::new(MEM_DIR), mem_opts(codec, &fs)) else {
                continue; // refused at open: damage_to_a_runs_newest_table_is_loud
            };
            if !s.recovery().snapshot_fallbacks.is_empty() {
                continue;
            }
            let close = Change::Finalize {
                status: runlog::run::RunStatus::NeedsAttention,
                result: None,
            };
            let c = scans.corrupt;
            append_over_damage(&s, &fs, &file, &transition(at, &close), &what, &mut scans);
            if scans.corrupt == c {
                continue; // the damage is where no scan reads (the header, the index)
            }
            // The run is still open after a failed close: look each unit up
            // (the odd ones are in progress) until one lookup meets the damage.
            for i in (1..UNITS).step_by(2) {
                let done = Change::Unit {
                    unit: name(i),
                    status: UnitStatus::Done,
                    note: None,
                    deps: None,
                };
                let c = lookups.corrupt;
                append_over_damage(
                    &s,
                    &fs,
                    &file,
                    &transition(at + i, &done),
                    &what,
                    &mut lookups,
                );
                if lookups.corrupt > c {
                    break;
                }
            }
        }
        assert!(
            scans.corrupt > 0,
            "{codec:?}: no close met the damage: {scans:?}"
        );
        assert!(
            lookups.corrupt > 0,
            "{codec:?}: no lookup met the damage: {lookups:?}"
        );
    }
}
