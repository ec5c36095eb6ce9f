//! How a run stands, for someone looking over many: running, idle, needing
//! attention, failed or done ([`Health`]). A run's `status` says only whether
//! it was finalized; a live run whose writer died, or that a driver left with
//! blocked units, is still `running` there. Its health tells them apart from
//! the header, the counts, and one look at the writer lock.
//!
//! The rules, for a run not finalized:
//!
//! 1. a phase is `blocked`: **needs attention** (something stopped for a
//!    human: `runlog.drive` records its stop with blocked units so);
//! 2. else, no change for at least [`Health::IDLE_AFTER`] and no writer holds its
//!    lock: **needs attention** when units are blocked, else **idle**
//!    (nothing is working on it);
//! 3. else **running**.
//!
//! A finalized run is **done** (`done`) or **failed** (`needs_attention`,
//! `aborted`). A store never initialized is **idle**, or **running** while a
//! writer holds it (a create in progress).

use super::doc::{PhaseStatus, RunDoc, RunStatus};
use super::units::UnitCounts;
use serde::Serialize;
use std::time::Duration;

/// How a run stands. For a run not finalized: a phase `blocked` is
/// [`NeedsAttention`](Health::NeedsAttention); else, no change for at least
/// [`Health::IDLE_AFTER`] and no writer holding its lock is `NeedsAttention` when
/// units are blocked, else [`Idle`](Health::Idle); else
/// [`Running`](Health::Running). A finalized run is [`Done`](Health::Done)
/// (`done`) or [`Failed`](Health::Failed) (`needs_attention`, `aborted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Not finalized, and something is stopped for a human: a phase blocked,
    /// or units blocked with no writer and no change for [`Health::IDLE_AFTER`].
    NeedsAttention,
    /// Finalized `needs_attention` or `aborted`.
    Failed,
    /// Not finalized, nothing blocked, no writer and no change for [`Health::IDLE_AFTER`].
    Idle,
    /// Not finalized, and a writer holds it or it changed within [`Health::IDLE_AFTER`].
    Running,
    /// Finalized `done`.
    Done,
}

impl Health {
    /// A live run with no writer and no change for this long is idle: 5 minutes,
    /// far longer than any pause between a working writer's changes, short enough
    /// to be seen the same morning.
    pub const IDLE_AFTER: Duration = Duration::from_secs(5 * 60);

    /// The name in JSON (`needs_attention`, `failed`, `idle`, `running`, `done`).
    pub fn as_str(self) -> &'static str {
        match self {
            Health::NeedsAttention => "needs_attention",
            Health::Failed => "failed",
            Health::Idle => "idle",
            Health::Running => "running",
            Health::Done => "done",
        }
    }

    /// Where a list of runs puts it: trouble first (needs attention, then
    /// failed), then idle, running, done.
    pub fn rank(self) -> u8 {
        match self {
            Health::NeedsAttention => 0,
            Health::Failed => 1,
            Health::Idle => 2,
            Health::Running => 3,
            Health::Done => 4,
        }
    }

    /// True when someone should look: needs attention, failed or idle.
    pub fn is_trouble(self) -> bool {
        self.rank() < Health::Running.rank()
    }
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run's [`Health`] and why, in one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Assessment {
    /// How it stands.
    pub health: Health,
    /// Why, for a person (empty for a run running as expected).
    pub why: String,
    /// How long since its last change (ms), when its header says.
    pub quiet_ms: Option<i64>,
    /// Whether a writer held its lock, when that was looked at (only for a
    /// live run quiet for [`Health::IDLE_AFTER`], or one never initialized).
    pub writer: Option<bool>,
}

impl Assessment {
    /// The health of a run with header `doc` and counts `counts` at `now_ms`
    /// (ms since the epoch). `writer_active` looks at the writer lock; it is
    /// called only when the answer matters (a live run quiet for
    /// [`Health::IDLE_AFTER`] with no phase blocked, or a store never initialized).
    pub fn of(
        doc: &RunDoc,
        counts: &UnitCounts,
        now_ms: i64,
        writer_active: impl FnOnce() -> bool,
    ) -> Assessment {
        let quiet_ms = super::clock::parse_rfc3339(&doc.updated_at).map(|t| (now_ms - t).max(0));
        let done = |health, why: String| Assessment {
            health,
            why,
            quiet_ms,
            writer: None,
        };
        if !doc.is_initialized() {
            let writer = writer_active();
            return Assessment {
                health: if writer {
                    Health::Running
                } else {
                    Health::Idle
                },
                why: if writer {
                    "being created".into()
                } else {
                    "never initialized (a create that did not finish)".into()
                },
                quiet_ms,
                writer: Some(writer),
            };
        }
        match doc.status {
            RunStatus::Done => return done(Health::Done, String::new()),
            RunStatus::NeedsAttention | RunStatus::Aborted => {
                let open = doc.open_at_finish.as_ref().map_or(0, |o| o.units.len());
                let mut why = format!("finalized {}", doc.status);
                if open > 0 {
                    why.push_str(&format!(" with {open} unit(s) not done"));
                }
                return done(Health::Failed, why);
            }
            RunStatus::Running => {}
        }
        let blocked_units = if counts.blocked > 0 {
            format!("{} unit(s) blocked", counts.blocked)
        } else {
            String::new()
        };
        let blocked_phases: Vec<&str> = doc
            .phases
            .iter()
            .filter(|(_, p)| p.status == PhaseStatus::Blocked)
            .map(|(n, _)| n.as_str())
            .collect();
        if !blocked_phases.is_empty() {
            let mut why = format!(
                "phase{} {} blocked",
                if blocked_phases.len() > 1 { "s" } else { "" },
                blocked_phases.join(", ")
            );
            if !blocked_units.is_empty() {
                why.push_str(&format!(", {blocked_units}"));
            }
            return done(Health::NeedsAttention, why);
        }
        let quiet = quiet_ms.is_none_or(|q| q >= Health::IDLE_AFTER.as_millis() as i64);
        if !quiet {
            return done(Health::Running, String::new());
        }
        let writer = writer_active();
        let since = quiet_ms.map_or_else(
            || "no change recorded".to_string(),
            |q| format!("no change for {}", duration_text(q)),
        );
        let (health, why) = if writer {
            (Health::Running, format!("a writer holds it; {since}"))
        } else if counts.blocked > 0 {
            (
                Health::NeedsAttention,
                format!("{blocked_units}; no writer, {since}"),
            )
        } else if counts.open() == 0 {
            (
                Health::Idle,
                format!("every unit done but not finalized; no writer, {since}"),
            )
        } else {
            (
                Health::Idle,
                format!("{} unit(s) not done; no writer, {since}", counts.open()),
            )
        };
        Assessment {
            health,
            why,
            quiet_ms,
            writer: Some(writer),
        }
    }
}

/// `ms` as `45s`, `12m`, `3h05m` or `2d04h`.
fn duration_text(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        s => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::doc::{OpenAtFinish, Phase, UnitStatus};

    const NOW: i64 = 1_800_000_000_000;

    fn ts(ms: i64) -> String {
        crate::run::clock::format_rfc3339(ms)
    }

    fn live(updated_ms_ago: i64) -> RunDoc {
        RunDoc {
            schema_version: 2,
            id: "r".into(),
            created_at: ts(NOW - 3_600_000),
            updated_at: ts(NOW - updated_ms_ago),
            ..Default::default()
        }
    }

    fn counts(pending: u64, done: u64, blocked: u64) -> UnitCounts {
        UnitCounts {
            pending,
            done,
            blocked,
            ..Default::default()
        }
    }

    const MIN: i64 = 60_000;

    #[test]
    fn a_live_run_that_changed_lately_is_running_without_a_look_at_the_lock() {
        let a = Assessment::of(&live(MIN), &counts(3, 1, 2), NOW, || {
            panic!("the lock is not looked at")
        });
        assert_eq!((a.health, a.writer), (Health::Running, None));
        assert_eq!(a.quiet_ms, Some(MIN));
    }

    #[test]
    fn quiet_with_no_writer_is_idle_and_with_blocked_units_needs_attention() {
        let a = Assessment::of(&live(12 * MIN), &counts(3, 1, 0), NOW, || false);
        assert_eq!(a.health, Health::Idle);
        assert_eq!(a.why, "3 unit(s) not done; no writer, no change for 12m");
        assert_eq!(a.writer, Some(false));

        let a = Assessment::of(&live(12 * MIN), &counts(3, 1, 2), NOW, || false);
        assert_eq!(a.health, Health::NeedsAttention);
        assert_eq!(a.why, "2 unit(s) blocked; no writer, no change for 12m");

        let a = Assessment::of(&live(12 * MIN), &counts(0, 4, 0), NOW, || false);
        assert_eq!(a.health, Health::Idle);
        assert!(
            a.why.starts_with("every unit done but not finalized"),
            "{}",
            a.why
        );
    }

    #[test]
    fn the_threshold_is_five_minutes_exactly() {
        let just_under = Assessment::of(&live(5 * MIN - 1), &counts(1, 0, 1), NOW, || false);
        assert_eq!(just_under.health, Health::Running);
        let at = Assessment::of(&live(5 * MIN), &counts(1, 0, 1), NOW, || false);
        assert_eq!(at.health, Health::NeedsAttention);
    }

    #[test]
    fn quiet_but_a_writer_holds_it_is_running() {
        let a = Assessment::of(&live(3 * 60 * MIN), &counts(1, 0, 1), NOW, || true);
        assert_eq!((a.health, a.writer), (Health::Running, Some(true)));
        assert_eq!(a.why, "a writer holds it; no change for 3h00m");
    }

    #[test]
    fn a_blocked_phase_needs_attention_at_once_writer_or_not() {
        let mut d = live(0);
        d.phases.insert(
            "runlog.drive".into(),
            Phase {
                status: PhaseStatus::Blocked,
                started_at: None,
                updated_at: d.updated_at.clone(),
                finished_at: None,
            },
        );
        let a = Assessment::of(&d, &counts(1, 2, 3), NOW, || panic!("no look needed"));
        assert_eq!(a.health, Health::NeedsAttention);
        assert_eq!(a.why, "phase runlog.drive blocked, 3 unit(s) blocked");
    }

    #[test]
    fn finalized_runs_are_done_or_failed() {
        let mut d = live(0);
        d.status = RunStatus::Done;
        assert_eq!(
            Assessment::of(&d, &counts(0, 1, 0), NOW, || true).health,
            Health::Done
        );
        d.status = RunStatus::NeedsAttention;
        d.open_at_finish = Some(OpenAtFinish {
            units: [("x".to_string(), UnitStatus::Blocked)].into(),
            items: vec![],
        });
        let a = Assessment::of(&d, &counts(0, 1, 1), NOW, || true);
        assert_eq!(a.health, Health::Failed);
        assert_eq!(a.why, "finalized needs_attention with 1 unit(s) not done");
        d.status = RunStatus::Aborted;
        assert_eq!(
            Assessment::of(&d, &counts(0, 1, 1), NOW, || true).health,
            Health::Failed
        );
    }

    #[test]
    fn a_store_never_initialized_is_idle_unless_a_writer_creates_it() {
        let d = RunDoc::default();
        assert_eq!(
            Assessment::of(&d, &UnitCounts::default(), NOW, || false).health,
            Health::Idle
        );
        assert_eq!(
            Assessment::of(&d, &UnitCounts::default(), NOW, || true).health,
            Health::Running
        );
    }

    #[test]
    fn trouble_sorts_first() {
        let mut all = [
            Health::Done,
            Health::Running,
            Health::Idle,
            Health::Failed,
            Health::NeedsAttention,
        ];
        all.sort_by_key(|h| h.rank());
        assert_eq!(
            all,
            [
                Health::NeedsAttention,
                Health::Failed,
                Health::Idle,
                Health::Running,
                Health::Done
            ]
        );
        assert!(Health::Idle.is_trouble() && !Health::Running.is_trouble());
    }

    #[test]
    fn durations_read_short() {
        assert_eq!(duration_text(45_000), "45s");
        assert_eq!(duration_text(12 * MIN), "12m");
        assert_eq!(duration_text(185 * MIN), "3h05m");
        assert_eq!(duration_text(52 * 60 * MIN), "2d04h");
    }
}
