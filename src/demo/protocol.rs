//! The lines a demo worker prints on stdout for its supervisor. Each is printed
//! (and flushed) only after the transition it reports is durable.

/// One line from the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// Recovery finished: how long it took, records replayed, units already done.
    Ready {
        /// Time to open the run and replay its log, in microseconds.
        recovery_us: u64,
        /// Records replayed.
        replayed: u64,
        /// Units already done.
        done: usize,
    },
    /// A transition is durable: its seq, unit, status, and fsyncs issued so far.
    Ack {
        /// The transition's seq.
        seq: u64,
        /// The unit.
        unit: String,
        /// Its new status.
        status: String,
        /// fsyncs the worker's store has issued so far.
        fsyncs: u64,
    },
    /// Every unit is done and the run is finalized.
    Finished {
        /// fsyncs the worker's store issued in all.
        fsyncs: u64,
    },
}

impl Line {
    /// The line as printed (without the newline).
    pub fn render(&self) -> String {
        match self {
            Line::Ready {
                recovery_us,
                replayed,
                done,
            } => format!("ready {recovery_us} {replayed} {done}"),
            Line::Ack {
                seq,
                unit,
                status,
                fsyncs,
            } => format!("ack {seq} {unit} {status} {fsyncs}"),
            Line::Finished { fsyncs } => format!("finished {fsyncs}"),
        }
    }

    /// Parses a complete line; `None` for anything else.
    pub fn parse(s: &str) -> Option<Line> {
        let mut w = s.split(' ');
        let line = match w.next()? {
            "ready" => Line::Ready {
                recovery_us: w.next()?.parse().ok()?,
                replayed: w.next()?.parse().ok()?,
                done: w.next()?.parse().ok()?,
            },
            "ack" => Line::Ack {
                seq: w.next()?.parse().ok()?,
                unit: w.next()?.to_string(),
                status: w.next()?.to_string(),
                fsyncs: w.next()?.parse().ok()?,
            },
            "finished" => Line::Finished {
                fsyncs: w.next()?.parse().ok()?,
            },
            _ => return None,
        };
        w.next().is_none().then_some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        for l in [
            Line::Ready {
                recovery_us: 5,
                replayed: 9,
                done: 2,
            },
            Line::Ack {
                seq: 3,
                unit: "u000001".into(),
                status: "done".into(),
                fsyncs: 2,
            },
            Line::Finished { fsyncs: 10 },
        ] {
            assert_eq!(Line::parse(&l.render()), Some(l));
        }
        assert_eq!(Line::parse("ack 3 u1"), None);
        assert_eq!(Line::parse("ack 3 u1 done 2 extra"), None);
    }
}
