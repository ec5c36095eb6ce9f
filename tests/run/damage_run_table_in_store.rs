//! Proves that damage to the newest table snapshot of a run's store (the run
//! model's units in a table, 300 units, both codecs) is never silent: every
//! 61st bit flipped (every bit position across the file) and every 97th cut
//! either falls back LOUDLY (`snapshot_fallbacks` names the table; the run
//! equals the whole-document reference model), or fails the open with
//! `Corrupt` naming the table, or keeps the table and then every unit lookup
//! returns the reference's unit or a `Corrupt` naming the table, and `verify`
//! reports the block — never a unit missing or wrong.
use crate::common;
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
                        matches!(&d.0, Error::Corrupt { path, .. } if path == &file),
                        "{what}: {d}"
                    );
                    errors += 1;
                }
            }
        }
    });
    let whole = s.read(doc_of);
    drop(s);
    let v = engine::verify(&fs, dir).unwrap();
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

#[test]
fn damage_to_a_runs_newest_table_is_loud() {
    for codec in codecs() {
        let (files, want, newest) = build(codec);
        let table = files.iter().find(|f| f.0 == newest).unwrap().1.clone();
        let base = (&files[..], &want, newest.as_str());
        let mut out = Outcomes::default();
        for bit in (0..table.len() * 8).step_by(61) {
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
    }
}
