//! The long lists of a run's page: failures first (blocked units with their
//! notes, retried units, units in progress for longer than most), then the
//! pending units, the eligible ones and those held back by a dependency.
//!
//! All of them come from one streamed scan of the units ([`scan`]), read as
//! the iteration goes, which holds one unit at a time plus what it keeps:
//! at most [`KEPT_PER_LIST`] entries per list, each note cut to
//! [`MAX_NOTE_CHARS`], and each list's exact total. So a list's memory is
//! bounded whatever the run's size: an entry holds at most a 256-byte name, a
//! 200-character note (≤ 800 bytes), four 256-byte dependency names and
//! about 100 bytes more, ≤ 2.2 KiB, so six lists of 1,000 hold at most about
//! 13 MiB per watched run in the worst case (names and notes that long), and
//! far less in practice (about 0.5 MiB for 20-byte names and short notes).
//! Feed.rs watches at most 8 runs at once. Each list's first 1,000 entries are
//! paged by [`PAGE_SIZE`]. A request never scans: it pages what is kept.
//!
//! After the scan, blocked, retried, stuck and pending are kept current from
//! the log's tail (follow.rs), entry by entry, within the same bounds: a unit
//! joining is kept only when it sorts among the first [`KEPT_PER_LIST`], a
//! unit leaving takes its entry, so a list may keep fewer entries than the
//! limit while its total is above it, until the next scan fills it again.
//! Following the tail also holds the read the lists are current at (its
//! header and the units changed since its snapshot, the same as any read of
//! the run) beside the watcher's newest read, and a step builds the new lists
//! as a copy: until the old copy is let go (by the step, and by any request
//! still paging it), a watched run holds two sets of lists, twice the bound
//! above at most, as during a rescan. Eligible, held back, the stuck
//! threshold and the chart are as of the last scan ([`ListSet::scan_seq`]):
//! the watcher scans again in the background when the run changed, no sooner
//! than [`min_rescan_gap`] after the last scan, and at once when the tail
//! could not be followed.

use runlog::run::{RunError, RunView, Unit, UnitStatus};
use serde::Serialize;
use std::collections::{BinaryHeap, HashSet};

/// Entries kept per list; the total is counted exactly beyond it.
pub const KEPT_PER_LIST: usize = 1000;
/// Entries per page.
pub const PAGE_SIZE: usize = 50;
/// A note is cut to this many characters in a list (the unit lookup shows it whole).
pub const MAX_NOTE_CHARS: usize = 200;
/// Open dependencies kept per held-back entry.
pub const MAX_DEPS_SHOWN: usize = 4;
/// Done units whose durations are sampled for the "stuck" threshold.
pub const DURATION_SAMPLE: usize = 4096;
/// Buckets of the rate chart (units finished over the run's life).
pub const CHART_BUCKETS: usize = 60;
/// Units a blocking-roots walk visits at most.
pub const MAX_ROOTS_WALK: usize = 1000;

/// The lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `blocked`, with the note saying why.
    Blocked,
    /// Attempts > 1, whatever the status now.
    Retried,
    /// `in_progress` for longer than most units take.
    Stuck,
    /// `pending`.
    Pending,
    /// Not done, every dependency done: what a resume would run now.
    Eligible,
    /// Not done, with a dependency not done.
    HeldBack,
}

/// Every list, in the order the page shows them.
pub const KINDS: [Kind; 6] = [
    Kind::Blocked,
    Kind::Retried,
    Kind::Stuck,
    Kind::Pending,
    Kind::Eligible,
    Kind::HeldBack,
];

impl Kind {
    /// The name in URLs and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Blocked => "blocked",
            Kind::Retried => "retried",
            Kind::Stuck => "stuck",
            Kind::Pending => "pending",
            Kind::Eligible => "eligible",
            Kind::HeldBack => "held_back",
        }
    }

    /// Kept current from the log's tail (follow.rs); the others are as of
    /// the last scan.
    pub fn kept_from_tail(self) -> bool {
        matches!(
            self,
            Kind::Blocked | Kind::Retried | Kind::Stuck | Kind::Pending
        )
    }

    /// The list named `s`.
    pub fn parse(s: &str) -> Option<Kind> {
        KINDS.into_iter().find(|k| k.name() == s)
    }
}

/// One unit in a list.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Its name.
    pub name: String,
    /// Its status.
    pub status: UnitStatus,
    /// Its attempts.
    pub attempts: u32,
    /// Its note, cut to [`MAX_NOTE_CHARS`].
    pub note: String,
    /// When it last changed (RFC 3339).
    pub updated_at: String,
    /// When it last went to `in_progress` (RFC 3339).
    pub started_at: Option<String>,
    /// Held back: its dependencies not done (at most [`MAX_DEPS_SHOWN`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub open_deps: Vec<String>,
}

impl Entry {
    /// The entry of unit `name` (`deps`: its open dependencies, held back only).
    pub fn of(name: &str, u: &Unit, deps: Vec<String>) -> Entry {
        Entry {
            name: name.to_string(),
            status: u.status,
            attempts: u.attempts,
            note: cut(&u.note, MAX_NOTE_CHARS),
            updated_at: u.updated_at.clone(),
            started_at: u.started_at.clone(),
            open_deps: deps,
        }
    }
}

/// A list: its exact total and its first [`KEPT_PER_LIST`] entries.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Bounded {
    /// How many units belong in it.
    pub total: u64,
    /// The first of them (name order; stuck ones oldest first).
    pub kept: Vec<Entry>,
}

impl Bounded {
    fn offer(&mut self, e: impl FnOnce() -> Entry) {
        self.total += 1;
        if self.kept.len() < KEPT_PER_LIST {
            self.kept.push(e());
        }
    }

    /// Where `name` is or would go among the kept entries (name order).
    fn position(&self, name: &str) -> Result<usize, usize> {
        self.kept.binary_search_by(|e| e.name.as_str().cmp(name))
    }

    /// A unit joins the list (name order): the total grows; the entry is kept
    /// when the kept entries are every member (and fewer than the limit) or
    /// it sorts before the last kept one, so what is kept stays the list's
    /// first members by name.
    pub fn join(&mut self, e: Entry) {
        let all_kept = self.kept.len() as u64 == self.total;
        self.total += 1;
        match self.position(&e.name) {
            Ok(i) => self.kept[i] = e,
            Err(i) if i < self.kept.len() || all_kept => {
                self.kept.insert(i, e);
                self.kept.truncate(KEPT_PER_LIST);
            }
            Err(_) => {}
        }
    }

    /// A unit leaves the list: the total shrinks and its kept entry goes.
    /// The kept entries then fall short of the limit while the total is above
    /// them; the next rescan fills them again.
    pub fn leave(&mut self, name: &str) {
        self.total = self.total.saturating_sub(1);
        if let Some(i) = self.kept.iter().position(|e| e.name == name) {
            self.kept.remove(i);
        }
    }

    /// A unit that stays in the list changed: its kept entry, if any, is replaced.
    pub fn update(&mut self, e: Entry) {
        if let Some(x) = self.kept.iter_mut().find(|x| x.name == e.name) {
            *x = e;
        }
    }
}

/// Units finished per bucket over the run's life: the rate chart.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Chart {
    /// The first bucket's start (ms since the epoch).
    pub from_ms: i64,
    /// The last bucket's end.
    pub to_ms: i64,
    /// Units that went to `done` in each bucket.
    pub buckets: Vec<u64>,
}

/// What one scan found, then kept current from the log's tail (follow.rs).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSet {
    /// The seq the lists are current at: the scan's, then the last one the
    /// tail brought (blocked, retried, stuck, pending, `done`).
    pub seq: u64,
    /// The seq of the last scan: eligible, held back, the stuck threshold and
    /// units newly in progress long enough to be stuck, and the chart are as of it.
    pub scan_seq: u64,
    /// When the scan started (ms since the epoch).
    pub scanned_at_ms: i64,
    /// How long it took.
    pub took_ms: u64,
    /// In progress at least this long (ms) counts as stuck: the smallest power
    /// of two seconds at or above three times the median duration of done units.
    pub stuck_after_ms: u64,
    /// The lists, in [`KINDS`] order.
    #[serde(skip)]
    pub lists: Vec<Bounded>,
    /// Units done (the resume set's skip), as of the last scan, as eligible
    /// and held back are.
    pub done: u64,
    /// The rate chart.
    pub chart: Chart,
}

impl ListSet {
    /// The list `kind`.
    pub fn list(&self, kind: Kind) -> &Bounded {
        let i = KINDS.iter().position(|k| *k == kind).unwrap_or(0);
        &self.lists[i]
    }

    /// The list `kind`, to change.
    pub fn list_mut(&mut self, kind: Kind) -> &mut Bounded {
        let i = KINDS.iter().position(|k| *k == kind).unwrap_or(0);
        &mut self.lists[i]
    }

    /// Each list's total, by name.
    pub fn totals(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for k in KINDS {
            m.insert(k.name().into(), self.list(k).total.into());
        }
        m.into()
    }

    /// Page `page` (from 0) of list `kind`: entries and paging facts.
    pub fn page(&self, kind: Kind, page: usize) -> serde_json::Value {
        let l = self.list(kind);
        let pages = l.kept.len().div_ceil(PAGE_SIZE).max(1);
        let start = page.saturating_mul(PAGE_SIZE).min(l.kept.len());
        let end = (start + PAGE_SIZE).min(l.kept.len());
        serde_json::json!({
            "list": kind.name(),
            "total": l.total,
            "kept": l.kept.len(),
            "keptLimit": KEPT_PER_LIST,
            "page": page,
            "pages": pages,
            "pageSize": PAGE_SIZE,
            "entries": &l.kept[start..end],
            "seq": if kind.kept_from_tail() { self.seq } else { self.scan_seq },
            "scannedAtMs": self.scanned_at_ms,
        })
    }
}

fn cut(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The age bucket of `age_ms`: 0 under a second, else 1 + log2(seconds).
fn age_bucket(age_ms: i64) -> usize {
    let s = (age_ms.max(0) / 1000) as u64;
    if s == 0 { 0 } else { 1 + s.ilog2() as usize }
}

/// A small deterministic generator for the duration sample (splitmix64).
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Scans every unit of `view` once, as the iteration goes, and builds the
/// lists. `now_ms` is the scan's clock (ages and the chart's end).
pub fn scan(view: &RunView<'_>, seq: u64, now_ms: i64) -> Result<ListSet, RunError> {
    let t0 = std::time::Instant::now();
    let mut lists: Vec<Bounded> = KINDS.iter().map(|_| Bounded::default()).collect();
    let idx = |k: Kind| KINDS.iter().position(|x| *x == k).unwrap_or(0);
    let (bl, re, pe, el, hb) = (
        idx(Kind::Blocked),
        idx(Kind::Retried),
        idx(Kind::Pending),
        idx(Kind::Eligible),
        idx(Kind::HeldBack),
    );
    let header = view.header();
    let from_ms = runlog::run::SystemClock::parse_rfc3339(&header.created_at).unwrap_or(now_ms);
    let to_ms = now_ms.max(from_ms + 1);
    let mut chart = vec![0u64; CHART_BUCKETS];
    let span = (to_ms - from_ms) as i128;
    let mut sample: Vec<i64> = Vec::new();
    let mut seen_done = 0u64;
    let mut mix = Mix(seq);
    // The oldest in-progress units (a max-heap on start time keeps the
    // KEPT_PER_LIST smallest) and how many are in each age bucket.
    let mut oldest: BinaryHeap<(i64, String)> = BinaryHeap::new();
    let mut ages = [0u64; 64];
    let mut done = 0u64;
    for u in view.units() {
        let (name, u) = u?;
        let ms = |s: &Option<String>| {
            s.as_deref()
                .and_then(runlog::run::SystemClock::parse_rfc3339)
        };
        let entry = |deps: Vec<String>| Entry::of(&name, &u, deps);
        if u.attempts > 1 {
            lists[re].offer(|| entry(vec![]));
        }
        match u.status {
            UnitStatus::Done => {
                done += 1;
                if let Some(f) = ms(&u.finished_at) {
                    let b = ((f.clamp(from_ms, to_ms - 1) - from_ms) as i128
                        * CHART_BUCKETS as i128
                        / span) as usize;
                    chart[b.min(CHART_BUCKETS - 1)] += 1;
                    if let Some(s) = ms(&u.started_at) {
                        // Reservoir sampling: every done unit equally likely.
                        seen_done += 1;
                        let d = (f - s).max(0);
                        if sample.len() < DURATION_SAMPLE {
                            sample.push(d);
                        } else {
                            let j = mix.next() % seen_done;
                            if (j as usize) < DURATION_SAMPLE {
                                sample[j as usize] = d;
                            }
                        }
                    }
                }
                continue;
            }
            UnitStatus::Blocked => lists[bl].offer(|| entry(vec![])),
            UnitStatus::Pending => lists[pe].offer(|| entry(vec![])),
            UnitStatus::InProgress => {
                let started = ms(&u.started_at)
                    .unwrap_or_else(|| ms(&Some(u.updated_at.clone())).unwrap_or(now_ms));
                ages[age_bucket(now_ms - started).min(63)] += 1;
                oldest.push((started, name.clone()));
                if oldest.len() > KEPT_PER_LIST {
                    oldest.pop();
                }
            }
            UnitStatus::DepBlocked => {}
        }
        let mut open = Vec::new();
        let mut open_total = 0usize;
        for d in &u.depends_on {
            if view.unit(d)?.is_none_or(|x| x.status != UnitStatus::Done) {
                open_total += 1;
                if open.len() < MAX_DEPS_SHOWN {
                    open.push(d.clone());
                }
            }
        }
        if open_total == 0 {
            lists[el].offer(|| entry(vec![]));
        } else {
            lists[hb].offer(|| entry(open));
        }
    }
    sample.sort_unstable();
    let median = sample.get(sample.len() / 2).copied().unwrap_or(0).max(0) as u64;
    // Bucket k ≥ 1 holds ages of 2^(k-1) s and more (up to 2^k s).
    let mut k = 1usize;
    while k < 63 && (1000u64 << (k - 1)) < median.saturating_mul(3) {
        k += 1;
    }
    let stuck_after_ms = 1000u64 << (k - 1);
    let st = idx(Kind::Stuck);
    lists[st].total = ages[k..].iter().sum();
    let mut old = oldest.into_sorted_vec();
    old.retain(|(s, _)| now_ms - s >= stuck_after_ms as i64);
    for (_, name) in old {
        if let Some(u) = view.unit(&name)? {
            lists[st].kept.push(Entry {
                name,
                status: u.status,
                attempts: u.attempts,
                note: cut(&u.note, MAX_NOTE_CHARS),
                updated_at: u.updated_at,
                started_at: u.started_at,
                open_deps: vec![],
            });
        }
    }
    Ok(ListSet {
        seq,
        scan_seq: seq,
        scanned_at_ms: now_ms,
        took_ms: t0.elapsed().as_millis() as u64,
        stuck_after_ms,
        lists,
        done,
        chart: Chart {
            from_ms,
            to_ms,
            buckets: chart,
        },
    })
}

/// The roots blocking a unit with dependencies `deps`: the not-done units
/// reached through not-done dependencies that have none themselves (an
/// unknown unit is a root). Visits at most [`MAX_ROOTS_WALK`] units; the
/// flag says the walk stopped there.
pub fn blocking_roots(
    view: &RunView<'_>,
    deps: &[String],
) -> Result<(Vec<String>, bool), RunError> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut stack: Vec<String> = deps.to_vec();
    let mut roots = Vec::new();
    while let Some(d) = stack.pop() {
        if !seen.insert(d.clone()) {
            continue;
        }
        if seen.len() > MAX_ROOTS_WALK {
            roots.sort();
            return Ok((roots, true));
        }
        match view.unit(&d)? {
            None => roots.push(d),
            Some(u) if u.status == UnitStatus::Done => {}
            Some(u) => {
                let mut open = false;
                for x in &u.depends_on {
                    if view.unit(x)?.is_none_or(|y| y.status != UnitStatus::Done) {
                        open = true;
                        stack.push(x.clone());
                    }
                }
                if !open {
                    roots.push(d);
                }
            }
        }
    }
    roots.sort();
    roots.dedup();
    Ok((roots, false))
}

/// How long the watcher waits between two scans of a changed run: at least
/// thirty seconds, and ten times what the last scan took, so scanning takes
/// at most an eleventh of one core. (Blocked, retried, stuck and pending do
/// not wait for it: the tail keeps them current, follow.rs.)
pub fn min_rescan_gap(last_took_ms: u64) -> std::time::Duration {
    std::time::Duration::from_millis(last_took_ms.saturating_mul(10).max(30_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_cut_on_a_character_boundary() {
        assert_eq!(cut("ab", 5), "ab");
        assert_eq!(cut("ééé", 2), "éé…");
    }

    #[test]
    fn age_buckets_double() {
        assert_eq!(age_bucket(0), 0);
        assert_eq!(age_bucket(999), 0);
        assert_eq!(age_bucket(1000), 1);
        assert_eq!(age_bucket(3999), 2);
        assert_eq!(age_bucket(4000), 3);
        assert_eq!(age_bucket(-5), 0);
    }
}
