//! Issue 50, part 1: the rule that lets a writer keep up to K manifest PUTs
//! in flight (FORMAT.md §13.3–13.4, built in `src/remote/chain.rs` and
//! `flight.rs`), checked on a model of the chain. Nothing here runs runlog's
//! code: the model is the argument the format was built from, kept beside the
//! remote proofs (`remote_rounds_in_flight.rs` runs the built code through the
//! same scenarios) so it runs with them. The built reader takes the head among
//! the last `MAX_ROUNDS_IN_FLIGHT` slots below the lowest empty one; FORMAT.md
//! §13.3 shows that this is the head the model's reader takes.
//!
//! The model: manifest slots written create-only; writer processes that send
//! cumulative manifests at consecutive slots, at most K ahead of what they
//! know landed; claimers that list the slots, pick a slot and an epoch, and
//! fence; one process dying with its PUTs still in the network, so they can
//! land at any later time; every order of every delivery explored. In every
//! reachable state it checks that each record a writer acknowledged is in the
//! head a reader finds.
//!
//! The rule that holds:
//! * **Claim at the lowest empty slot** `L` (every slot below it exists, so
//!   nothing can land there any more), as a copy of the head of the slots
//!   below `L`, with that head's epoch + 1.
//! * **Read the head the same way:** among the slots below `L`, the newest
//!   manifest whose epoch no lower slot exceeds.
//! * **Acknowledge in slot order:** a writer acknowledges a slot once it and
//!   every slot it wrote before it landed, or were found taken by a lower
//!   epoch (superseded: manifests are cumulative, a later slot carries it);
//!   a slot taken by an equal or higher epoch fences the writer.
//! * **Every process claims an epoch of its own.**
//!
//! Three weaker rules lose acknowledged records, and the model finds each:
//! claiming at the newest slot + 1 (K = 3); claiming at the lowest empty slot
//! above the head read from the last K slots (K = 3); and a later process on
//! the same host resuming its predecessor's epoch, as runlog did before
//! issue 50, which is sound only at K = 1 (fails from K = 2).

use std::collections::{BTreeMap, HashSet};

/// Records as a bit set: manifests are cumulative.
type Recs = u16;

#[derive(Clone, Copy, Hash, Eq, PartialEq, Debug)]
struct Manifest {
    epoch: u8,
    content: Recs,
}

#[derive(Clone, Copy, Hash, Eq, PartialEq, Debug)]
enum Outcome {
    Pending,
    Created,
    /// Taken by a lower epoch: a later slot of this writer carries it.
    Superseded,
    Fenced,
}

#[derive(Clone, Copy, Hash, Eq, PartialEq, Debug)]
enum Phase {
    /// Will list the slots and claim.
    Idle,
    Claiming(u8),
    Writing,
    /// Lost its claim to an epoch at least its own.
    Done,
}

#[derive(Clone, Hash, Eq, PartialEq, Debug)]
struct Writer {
    epoch: u8,
    alive: bool,
    phase: Phase,
    /// The slots written since the claim, with what each carried.
    sent: Vec<(u8, Recs, Outcome)>,
    next_slot: u8,
    planned: Recs,
    acked: Recs,
    records_left: u8,
    first_record: u8,
    claims_left: u8,
}

#[derive(Clone, Hash, Eq, PartialEq, Debug)]
struct Put {
    slot: u8,
    m: Manifest,
    who: usize,
}

#[derive(Clone, Hash, Eq, PartialEq, Debug)]
struct State {
    slots: BTreeMap<u8, Manifest>,
    /// PUTs sent and not yet landed (or refused), in any order.
    net: Vec<Put>,
    writers: Vec<Writer>,
    /// Every record any writer acknowledged.
    acked: Recs,
    crashes_left: u8,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ClaimRule {
    /// The rule: at the lowest empty slot, over the head of the slots below it.
    LowestEmpty,
    /// At the lowest empty slot above the head read from the last K slots.
    LowestEmptyAboveWindowHead,
    /// At the newest slot + 1, over the head read from the last K slots.
    NewestPlusOne,
}

#[derive(Clone, Copy, Debug)]
struct Config {
    k: u8,
    max_slot: u8,
    claim: ClaimRule,
    /// A dead writer's successor on its host resumes its epoch, as before issue 50.
    successor_keeps_epoch: bool,
}

/// The newest manifest whose epoch no lower slot exceeds.
fn chain_head(slots: &BTreeMap<u8, Manifest>) -> Option<Manifest> {
    let mut best = 0;
    let mut head = None;
    for m in slots.values() {
        if m.epoch >= best {
            best = m.epoch;
            head = Some(*m);
        }
    }
    head
}

/// The head among the last K slots (the weaker rules' reading): the newest
/// manifest with the greatest epoch there, and its slot.
fn window_head(slots: &BTreeMap<u8, Manifest>, k: u8) -> Option<(u8, Manifest)> {
    let (&newest, _) = slots.iter().next_back()?;
    let mut window = slots.range(newest.saturating_sub(k - 1)..=newest);
    let top = window.clone().map(|(_, m)| m.epoch).max()?;
    window.rfind(|(_, m)| m.epoch == top).map(|(&s, &m)| (s, m))
}

/// The lowest empty slot and the head of the slots below it.
fn lowest_empty(slots: &BTreeMap<u8, Manifest>) -> Option<(u8, Manifest)> {
    let first = *slots.keys().next()?;
    let lowest = (first..=u8::MAX).find(|s| !slots.contains_key(s))?;
    let below: BTreeMap<u8, Manifest> = slots.range(..lowest).map(|(&s, &m)| (s, m)).collect();
    Some((lowest, chain_head(&below)?))
}

/// The head a reader (a restore, a verify) finds under `cfg`'s rule.
fn read_head(slots: &BTreeMap<u8, Manifest>, cfg: &Config) -> Option<Manifest> {
    match cfg.claim {
        ClaimRule::LowestEmpty => lowest_empty(slots).map(|(_, h)| h),
        _ => window_head(slots, cfg.k).map(|(_, h)| h),
    }
}

/// Where a claim goes, and the head it copies.
fn claim_at(slots: &BTreeMap<u8, Manifest>, cfg: &Config) -> Option<(u8, Manifest)> {
    match cfg.claim {
        ClaimRule::LowestEmpty => lowest_empty(slots),
        ClaimRule::LowestEmptyAboveWindowHead => {
            let (h, m) = window_head(slots, cfg.k)?;
            Some(((h + 1..=u8::MAX).find(|s| !slots.contains_key(s))?, m))
        }
        ClaimRule::NewestPlusOne => {
            let (_, m) = window_head(slots, cfg.k)?;
            Some((slots.keys().next_back()? + 1, m))
        }
    }
}

impl Writer {
    fn new(first_record: u8, records: u8, claims: u8) -> Writer {
        Writer {
            epoch: 0,
            alive: true,
            phase: Phase::Idle,
            sent: vec![],
            next_slot: 0,
            planned: 0,
            acked: 0,
            records_left: records,
            first_record,
            claims_left: claims,
        }
    }

    /// A writer holding `epoch` from before, writing from `slot` over `content`.
    fn holding(epoch: u8, slot: u8, content: Recs, first_record: u8, records: u8) -> Writer {
        let mut w = Writer::new(first_record, records, 0);
        w.epoch = epoch;
        w.phase = Phase::Writing;
        w.next_slot = slot;
        w.planned = content;
        w
    }

    fn fenced(&self) -> bool {
        self.sent.iter().any(|s| s.2 == Outcome::Fenced)
    }

    /// Slot `m` may be sent once every slot it wrote at or below `m − K` is settled.
    fn window_allows(&self, m: u8, k: u8) -> bool {
        self.sent
            .iter()
            .filter(|s| s.0 + k <= m)
            .all(|s| matches!(s.2, Outcome::Created | Outcome::Superseded))
    }

    /// Acknowledges in slot order, up to the first slot unknown or fenced;
    /// returns what it acknowledged now.
    fn settle(&mut self) -> Recs {
        let mut newly = 0;
        for &(_, content, o) in &self.sent {
            match o {
                Outcome::Created => {
                    newly |= content & !self.acked;
                    self.acked |= content;
                }
                Outcome::Superseded => {}
                Outcome::Pending | Outcome::Fenced => break,
            }
        }
        newly
    }

    /// What the next manifest carries: one more record, or (its last slot
    /// superseded) the same content again at the next slot.
    fn next_content(&self) -> Option<Recs> {
        if self.records_left > 0 {
            return Some(self.planned | 1 << (self.first_record + self.records_left - 1));
        }
        let carried = self
            .sent
            .iter()
            .any(|s| s.1 == self.planned && matches!(s.2, Outcome::Created | Outcome::Pending));
        (!carried).then_some(self.planned)
    }
}

/// Every state one writer's send (a manifest, or a claim) leads to.
fn sends(st: &State, cfg: &Config, out: &mut Vec<State>) {
    for (w, wr) in st.writers.iter().enumerate() {
        if !wr.alive || wr.fenced() {
            continue;
        }
        let (slot, m) = match wr.phase {
            Phase::Writing => {
                let slot = wr.next_slot;
                if slot > cfg.max_slot || !wr.window_allows(slot, cfg.k) {
                    continue;
                }
                let Some(content) = wr.next_content() else {
                    continue;
                };
                let epoch = wr.epoch;
                (slot, Manifest { epoch, content })
            }
            Phase::Idle if wr.claims_left > 0 => {
                let Some((slot, head)) = claim_at(&st.slots, cfg) else {
                    continue;
                };
                let epoch = head.epoch + 1;
                (slot, Manifest { epoch, ..head })
            }
            _ => continue,
        };
        if slot > cfg.max_slot {
            continue;
        }
        let mut s = st.clone();
        let x = &mut s.writers[w];
        if x.phase == Phase::Writing {
            x.records_left = x.records_left.saturating_sub(1);
            x.sent.push((slot, m.content, Outcome::Pending));
            x.next_slot += 1;
        } else {
            x.claims_left -= 1;
            x.phase = Phase::Claiming(slot);
            x.epoch = m.epoch;
            x.sent.clear();
        }
        x.planned = m.content;
        s.net.push(Put { slot, m, who: w });
        out.push(s);
    }
}

/// Every state one delivery leads to: the PUT lands, or finds its slot taken,
/// and its writer (when alive) learns which.
fn deliveries(st: &State, out: &mut Vec<State>) {
    for i in 0..st.net.len() {
        let mut s = st.clone();
        let p = s.net.remove(i);
        let taken = s.slots.get(&p.slot).copied();
        if taken.is_none() {
            s.slots.insert(p.slot, p.m);
        }
        let x = &mut s.writers[p.who];
        match (x.alive, x.phase) {
            (true, Phase::Claiming(slot)) if slot == p.slot => {
                x.phase = match taken {
                    None => {
                        x.next_slot = slot + 1;
                        Phase::Writing
                    }
                    Some(t) if t.epoch >= x.epoch => Phase::Done,
                    Some(_) => Phase::Idle,
                };
            }
            (true, Phase::Writing) => {
                let o = match taken {
                    None => Outcome::Created,
                    Some(t) if t.epoch < x.epoch => Outcome::Superseded,
                    // An equal epoch is another process's (a second claimer of
                    // it, or the predecessor under the weaker variant).
                    Some(_) => Outcome::Fenced,
                };
                if let Some(e) = x.sent.iter_mut().find(|e| e.0 == p.slot) {
                    e.2 = o;
                }
                s.acked |= x.settle();
            }
            _ => {}
        }
        out.push(s);
    }
}

/// Every state one writer's death leads to (its PUTs stay in the network);
/// under the weaker variant its successor resumes its epoch, as runlog did
/// before issue 50: a higher epoch at the head fences it.
fn crashes(st: &State, cfg: &Config, out: &mut Vec<State>) {
    if st.crashes_left == 0 {
        return;
    }
    for (w, wr) in st.writers.iter().enumerate() {
        if !wr.alive || !matches!(wr.phase, Phase::Writing | Phase::Claiming(_)) {
            continue;
        }
        let mut s = st.clone();
        s.crashes_left -= 1;
        s.writers[w].alive = false;
        if cfg.successor_keeps_epoch
            && wr.phase == Phase::Writing
            && let Some((slot, head)) = claim_at(&s.slots, cfg)
            && head.epoch <= wr.epoch
        {
            s.writers
                .push(Writer::holding(wr.epoch, slot, head.content, 12, 1));
        }
        out.push(s);
    }
}

/// Explores every reachable state: the number explored, or the first state
/// where an acknowledged record is missing from the head, with what is missing.
fn explore(cfg: Config) -> Result<usize, (Recs, State)> {
    // Writer 0 holds epoch 1 from manifest 1 and has 3 records to ship;
    // writers 1 and 2 claim (twice at most each) and ship 2 and 1.
    let genesis = Manifest {
        epoch: 1,
        content: 0,
    };
    let mut stack = vec![State {
        slots: BTreeMap::from([(1, genesis)]),
        net: vec![],
        writers: vec![
            Writer::holding(1, 2, 0, 0, 3),
            Writer::new(4, 2, 2),
            Writer::new(8, 1, 2),
        ],
        acked: 0,
        crashes_left: 1,
    }];
    let mut seen: HashSet<State> = HashSet::new();
    while let Some(st) = stack.pop() {
        if !seen.insert(st.clone()) {
            continue;
        }
        let head = read_head(&st.slots, &cfg).map_or(0, |h| h.content);
        if st.acked & !head != 0 {
            return Err((st.acked & !head, st));
        }
        let mut next = vec![];
        sends(&st, &cfg, &mut next);
        deliveries(&st, &mut next);
        crashes(&st, &cfg, &mut next);
        stack.extend(next);
    }
    Ok(seen.len())
}

fn config(k: u8, claim: ClaimRule, successor_keeps_epoch: bool) -> Config {
    Config {
        k,
        max_slot: 9,
        claim,
        successor_keeps_epoch,
    }
}

#[test]
fn claiming_and_reading_at_the_lowest_empty_slot_loses_nothing_acknowledged_with_up_to_3_rounds_in_flight()
 {
    for k in 1..=3 {
        match explore(config(k, ClaimRule::LowestEmpty, false)) {
            Ok(states) => {
                eprintln!("in-flight rule, K = {k}: {states} states, every ack in the head")
            }
            Err((lost, st)) => {
                panic!("K = {k}: acknowledged records {lost:#b} missing from the head in {st:#?}")
            }
        }
    }
}

#[test]
fn the_weaker_rules_lose_acknowledged_records_and_the_model_finds_each() {
    let cases = [
        (
            "claim at the newest slot + 1",
            ClaimRule::NewestPlusOne,
            false,
            3,
        ),
        (
            "claim above the last K slots' head",
            ClaimRule::LowestEmptyAboveWindowHead,
            false,
            3,
        ),
        (
            "the successor resumes its predecessor's epoch",
            ClaimRule::LowestEmpty,
            true,
            2,
        ),
    ];
    for (what, claim, keep, fails_from) in cases {
        for k in 1..=3 {
            let r = explore(config(k, claim, keep));
            assert_eq!(
                r.is_err(),
                k >= fails_from,
                "{what}, K = {k}: expected {} ({r:?})",
                if k >= fails_from {
                    "a lost ack"
                } else {
                    "none lost"
                }
            );
        }
    }
}
