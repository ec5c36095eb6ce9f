//! Regression: a rotation cuts the closed segment's preallocated zeros and
//! fsyncs it. When that fsync failed, the cut was lost from the disk (the kernel
//! drops what a failed fsync did not write) while the page cache kept showing the
//! short file. A writer reopened in the same boot saw no zeros, continued in the
//! segment, and a later rotation closed it without cutting again: on disk the
//! closed segment still ended in zeros, which recovery rightly calls corruption
//! ("zero-filled tail in a segment that is not the last"). Found by
//! tests/crash/fault_injection.rs; fixed by cutting the last segment to its records at
//! every writer open (FORMAT.md §5.5 step 4).
use crate::common;
use common::crash::*;
use common::*;
use runlog::engine::sim::{Fault, FaultKind, Op, Persistence, SimFs};
use runlog::engine::{Codec, Store};

/// Index of the fsync that closes the first segment in a run of `appends`.
fn rotation_fsync(appends: &[usize]) -> u64 {
    let fs = SimFs::new();
    let s = Store::<Ledger>::open(dir(), sim_opts(&fs, Codec::Binary)).unwrap();
    let before_appends = fs.ops() as usize;
    for (i, pad) in appends.iter().enumerate() {
        s.append(&entry(i as u64 + 1, *pad)).unwrap();
    }
    drop(s);
    let log = fs.op_log();
    let cut = before_appends
        + log[before_appends..]
            .iter()
            .position(|o| *o == Op::SetLen)
            .expect("the rotation cuts the zeros");
    let fsync = cut + log[cut..].iter().position(|o| *o == Op::Fsync).unwrap();
    fsync as u64
}

#[test]
fn a_failed_rotation_fsync_never_leaves_zeros_in_a_closed_segment() {
    // Segments of 4 KiB (sim_opts): the second append does not fit and rotates.
    let appends = [1, 4097];
    let at = rotation_fsync(&appends);
    let fs = SimFs::new();
    fs.inject(Some(Fault {
        at,
        kind: FaultKind::Eio,
        persistent: false,
    }));
    let o = sim_opts(&fs, Codec::Binary);
    let s = Store::<Ledger>::open(dir(), o.clone()).unwrap();
    s.append(&entry(1, appends[0])).unwrap();
    assert!(
        s.append(&entry(2, appends[1])).is_err(),
        "the rotation failed"
    );
    drop(s);
    // Same boot: the cache shows the cut segment. Reopen, then rotate again.
    let s = Store::<Ledger>::open(dir(), o).unwrap();
    assert_eq!(s.last_seq(), 1);
    s.append(&entry(2, appends[1])).unwrap();
    s.append(&entry(3, 10)).unwrap();
    drop(s);
    // Every state a crash can leave recovers to the acknowledged history.
    let history = [(1, appends[0]), (2, appends[1]), (3, 10)];
    for model in [Persistence::Ordered, Persistence::Weak] {
        for choice in fs.with_state(|st| st.outcomes(model, 3, 7)) {
            let img = fs.crash(&choice);
            let (state, _) = recover(&img, Codec::Binary, None).unwrap();
            check_prefix(&history, 3, &state).unwrap();
        }
    }
}
