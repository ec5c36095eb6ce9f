//! A bad frame at the end of the log, as a reader that holds no lock sees it:
//! a torn tail, or an append still in progress (FORMAT.md §5.6)?
//!
//! A `pwrite` is not atomic against a concurrent `read`: a reader may see a
//! prefix of a record whose write has not returned yet, which scans exactly
//! like a torn tail. The pure decision (`recovery::classify`) cannot tell the
//! two apart from the bytes, and is not asked to: this is the I/O at its
//! edge. It rests on one rule every writer keeps: **the bytes of a segment
//! change only under the writer lock (`LOCK`)**, which a writer releases only
//! after its writes returned (a one-shot writer after its batch's `pwrite`,
//! §5.8 step 2; a long-lived writer when it closes). So:
//!
//! 1. A read found a bad frame at offset `z` of the last segment `P`.
//! 2. Look at the lock ([`Vfs::lock_busy`]) until it is seen free. At that
//!    instant every write that was in flight during the read has returned, so
//!    a read that starts after it sees each of them whole (a read after a
//!    `write` returned sees its bytes, POSIX `write()`).
//! 3. Read the store again. Had the frame at `(P, z)` been an append in
//!    flight, that read finds it whole: a complete record, valid, which
//!    nothing in runlog ever rewrites (an open cuts only at a bad frame, its
//!    copy keeps every byte of the valid prefix, a rotation cuts only the
//!    zeros after the last record). So when the second read still finds the
//!    same bad frame (same segment, offset, length and reason), it was no
//!    append in flight: it is a torn tail.
//! 4. Anything else is settled by the second read itself: no bad frame (the
//!    append completed: clean), or one elsewhere (a later append, in flight
//!    after the look): look again, from step 2.
//!
//! A long-lived writer holds the lock for its whole life, so the lock may
//! never be seen free: after `wait` the frame is reported as an append in
//! progress ([`Tail::InProgress`]), not as damage. It may also be a torn tail
//! that writer has not cut yet (an open defers the cut to its first append,
//! §5.5): either way that writer completes the bytes or drops them before it
//! appends, and no acknowledged record is among them.

use crate::engine::error::Result;
use crate::engine::format::LOCK_FILE;
use crate::engine::io::vfs::Vfs;
use crate::engine::load::report::TornTailReport;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long `verify` waits for the writer lock to be free before it calls a
/// bad frame at the end of the log an append in progress: 2 s, far longer
/// than a one-shot writer holds the lock (its catch-up and one `pwrite`),
/// short enough for a monitor that runs `verify` beside a long-lived writer.
pub(crate) const VERIFY_SETTLE_WAIT: Duration = Duration::from_secs(2);

/// The first pause between two looks at the lock; it doubles up to
/// [`SETTLE_POLL_MAX`].
const SETTLE_POLL_MIN: Duration = Duration::from_millis(1);
/// The longest pause between two looks at the lock.
const SETTLE_POLL_MAX: Duration = Duration::from_millis(50);

/// What a settled read found at the end of its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tail {
    /// No bad frame at the end of the log.
    Whole,
    /// A bad frame that a read started after the lock was seen free found
    /// again, the same: a torn tail.
    Torn,
    /// A bad frame while a writer held the lock throughout `wait` (or while
    /// writers kept appending): an append in progress, not damage.
    InProgress,
}

/// Settles the bad frame `first` ended in, if any (see the module docs).
/// `tail` names a read's bad frame at the end of the log (`None`: none);
/// `again` reads the store once more, from the start. Returns the read that
/// settled it: `first` itself when it has none, else the last read made.
pub(crate) fn settle<T>(
    vfs: &dyn Vfs,
    dir: &Path,
    wait: Duration,
    first: T,
    tail: impl Fn(&T) -> Option<TornTailReport>,
    mut again: impl FnMut() -> Result<T>,
) -> Result<(T, Tail)> {
    let lock = dir.join(LOCK_FILE);
    let deadline = Instant::now() + wait;
    let mut pause = SETTLE_POLL_MIN;
    let mut current = first;
    loop {
        let Some(seen) = tail(&current) else {
            return Ok((current, Tail::Whole));
        };
        if vfs.lock_busy(&lock) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok((current, Tail::InProgress));
            }
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(SETTLE_POLL_MAX);
            continue;
        }
        // Seen free: every write in flight during `current`'s read has returned.
        let next = again()?;
        match tail(&next) {
            None => return Ok((next, Tail::Whole)),
            Some(t) if t == seen => return Ok((next, Tail::Torn)),
            // Another bad frame: an append that began after the look.
            Some(_) if Instant::now() >= deadline => return Ok((next, Tail::InProgress)),
            Some(_) => current = next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::io::vfs::LockAttempt;
    use std::cell::Cell;
    use std::io;
    use std::path::PathBuf;
    use std::sync::Mutex;

    /// A filesystem of which only `lock_busy` is ever called: busy for the
    /// first `busy` looks.
    #[derive(Debug)]
    struct Looks {
        busy: Mutex<usize>,
        looks: Mutex<usize>,
    }

    impl Looks {
        fn new(busy: usize) -> Looks {
            Looks {
                busy: Mutex::new(busy),
                looks: Mutex::new(0),
            }
        }
    }

    impl Vfs for Looks {
        fn lock_busy(&self, path: &Path) -> bool {
            assert!(path.ends_with(LOCK_FILE));
            *self.looks.lock().unwrap() += 1;
            let mut b = self.busy.lock().unwrap();
            let busy = *b > 0;
            *b = b.saturating_sub(1);
            busy
        }
        fn create_dir(&self, _: &Path) -> io::Result<()> {
            unreachable!()
        }
        fn dir_mode(&self, _: &Path) -> io::Result<u32> {
            unreachable!()
        }
        fn list(&self, _: &Path) -> io::Result<Vec<String>> {
            unreachable!()
        }
        fn create_new(&self, _: &Path) -> io::Result<Box<dyn crate::engine::VfsFile>> {
            unreachable!()
        }
        fn open_write(&self, _: &Path) -> io::Result<Box<dyn crate::engine::VfsFile>> {
            unreachable!()
        }
        fn read(&self, _: &Path) -> io::Result<Box<dyn crate::engine::FileData>> {
            unreachable!()
        }
        fn rename(&self, _: &Path, _: &Path) -> io::Result<()> {
            unreachable!()
        }
        fn remove(&self, _: &Path) -> io::Result<()> {
            unreachable!()
        }
        fn remove_dir(&self, _: &Path) -> io::Result<()> {
            unreachable!()
        }
        fn sync_dir(&self, _: &Path) -> io::Result<()> {
            unreachable!()
        }
        fn try_lock(&self, _: &Path, _: &str) -> io::Result<LockAttempt> {
            unreachable!()
        }
    }

    fn torn(offset: u64, bytes: u64) -> Option<TornTailReport> {
        Some(TornTailReport {
            path: PathBuf::from("seg"),
            offset,
            bytes,
            whole_file: false,
            reason: "incomplete frame".into(),
            quarantined_to: None,
            first_seq: 3,
            valid_frames_dropped: 0,
        })
    }

    /// Runs `settle` over the reads `reads` (the first is the one to
    /// settle), counting the reads made after it.
    fn run(
        fs: &Looks,
        wait: Duration,
        reads: Vec<Option<TornTailReport>>,
    ) -> (Option<TornTailReport>, Tail, usize) {
        let mut rest = reads.into_iter();
        let first = rest.next().unwrap();
        let again = Cell::new(0);
        let (last, t) = settle(fs, Path::new("d"), wait, first, Clone::clone, || {
            again.set(again.get() + 1);
            Ok(rest.next().expect("no more reads planned"))
        })
        .unwrap();
        (last, t, again.get())
    }

    #[test]
    fn a_read_without_a_bad_frame_looks_at_nothing() {
        let fs = Looks::new(0);
        assert_eq!(run(&fs, Duration::ZERO, vec![None]), (None, Tail::Whole, 0));
        assert_eq!(*fs.looks.lock().unwrap(), 0);
    }

    #[test]
    fn the_same_bad_frame_read_again_after_the_lock_was_seen_free_is_torn() {
        let fs = Looks::new(0);
        let r = run(&fs, Duration::ZERO, vec![torn(40, 7), torn(40, 7)]);
        assert_eq!(r, (torn(40, 7), Tail::Torn, 1));
    }

    #[test]
    fn a_frame_whole_when_read_again_is_no_tail() {
        // Busy twice, then free: the append completed meanwhile.
        let fs = Looks::new(2);
        let r = run(&fs, Duration::from_secs(60), vec![torn(40, 7), None]);
        assert_eq!(r, (None, Tail::Whole, 1));
        assert_eq!(*fs.looks.lock().unwrap(), 3);
    }

    #[test]
    fn a_bad_frame_that_changed_is_looked_at_again() {
        // The first frame completed; the read after the look met the next
        // append in flight, which the read after the next look finds whole.
        let fs = Looks::new(0);
        let r = run(
            &fs,
            Duration::from_secs(60),
            vec![torn(40, 7), torn(88, 3), None],
        );
        assert_eq!(r, (None, Tail::Whole, 2));
        // Same offset, more bytes present: not the same frame either.
        let fs = Looks::new(0);
        let r = run(
            &fs,
            Duration::from_secs(60),
            vec![torn(40, 7), torn(40, 9), torn(40, 9)],
        );
        assert_eq!(r, (torn(40, 9), Tail::Torn, 2));
    }

    #[test]
    fn a_lock_never_seen_free_is_an_append_in_progress_and_reads_nothing_again() {
        let fs = Looks::new(usize::MAX);
        let r = run(&fs, Duration::from_millis(5), vec![torn(40, 7)]);
        assert_eq!(r, (torn(40, 7), Tail::InProgress, 0));
    }

    #[test]
    fn with_no_wait_a_busy_lock_is_looked_at_once() {
        let fs = Looks::new(usize::MAX);
        let r = run(&fs, Duration::ZERO, vec![torn(40, 7)]);
        assert_eq!(r, (torn(40, 7), Tail::InProgress, 0));
        assert_eq!(*fs.looks.lock().unwrap(), 1);
        // Free, but changed under the look, and no time left: in progress.
        let fs = Looks::new(0);
        let r = run(&fs, Duration::ZERO, vec![torn(40, 7), torn(88, 3)]);
        assert_eq!(r, (torn(88, 3), Tail::InProgress, 1));
    }
}
