//! Proves that after an open falls back past a damaged newest snapshot, the
//! next compaction writes a valid snapshot in its place (it once took the
//! damaged file for the base: `compact` returned Ok without writing anything,
//! every later open fell back again, and the compaction after that trimmed the
//! log as if the damaged snapshot were good, so damage to the newest snapshot
//! then made the store unopenable). Whole-state and keyed (table) stores.
use crate::common;
use common::keyed::{Tab, tab_model, tab_observe};
use common::*;
use runlog::engine::{Keyed, Machine, Store};
use std::path::Path;

/// Appends `from..=to` with pad 3.
fn fill<M: Machine<Transition = Entry>>(s: &Store<M>, from: u64, to: u64) {
    for v in from..=to {
        s.append(&entry(v, 3)).unwrap();
    }
}

fn snap(seq: u64) -> String {
    format!("snap-{seq:020}.snap")
}

/// Runs the scenario on machine `M`; `check` compares the state with the
/// model of `1..=n`.
fn scenario<M: Machine<Transition = Entry>>(check: impl Fn(&Store<M>, u64)) {
    for codec in codecs() {
        let fs = mem_fs();
        let dir = Path::new(MEM_DIR);
        let open = || Store::<M>::open(dir, mem_opts(codec, &fs)).unwrap();
        let s = open();
        fill(&s, 1, 10);
        s.compact().unwrap();
        fill(&s, 11, 20);
        s.compact().unwrap();
        drop(s);
        // The newest snapshot is damaged: the open falls back to snap 10.
        fs.put(&dir.join(snap(20)), b"damaged".to_vec());
        let s = open();
        assert_eq!(s.recovery().snapshot_seq, Some(10), "{codec:?}");
        assert_eq!(s.recovery().snapshot_fallbacks.len(), 1, "{codec:?}");
        check(&s, 20);
        // The next compaction (nothing appended since) replaces it.
        let r = s.compact().unwrap();
        assert_eq!(r.snapshot_seq, 20);
        drop(s);
        let s = open();
        assert_eq!(s.recovery().snapshot_seq, Some(20), "{codec:?}: rewritten");
        assert!(s.recovery().snapshot_fallbacks.is_empty(), "{codec:?}");
        check(&s, 20);
        // And the log is trimmed only below a valid snapshot: damage to the
        // next one still falls back to a complete history.
        fill(&s, 21, 30);
        s.compact().unwrap();
        drop(s);
        fs.put(&dir.join(snap(30)), b"damaged".to_vec());
        let s = open();
        assert_eq!(s.recovery().snapshot_seq, Some(20), "{codec:?}");
        check(&s, 30);
    }
}

#[test]
fn whole_state_compaction_after_a_fallback_rewrites_the_damaged_snapshot() {
    scenario::<Ledger>(|s, n| {
        let values: Vec<u64> = (1..=n).collect();
        assert_eq!(s.read(|st| st.clone()), model(&values, 3));
    });
}

#[test]
fn keyed_compaction_after_a_fallback_rewrites_the_damaged_table() {
    scenario::<Keyed<Tab>>(|s, n| {
        let h: Vec<(u64, usize)> = (1..=n).map(|v| (v, 3)).collect();
        assert_eq!(s.read(tab_observe).unwrap(), tab_model(&h));
    });
}
