//! A restore's read-ahead (issue 50): the objects of a chain fetched with
//! several GETs in flight on the remote runtime, handed to the caller one at
//! a time in the order asked, so the caller checks and writes them in seq
//! order exactly as when it fetched one after the other. Bounded in requests
//! and in bytes ([`Remote::with_read_ahead`]); what is still in flight when
//! the reader is dropped (a check failed) is cancelled.

use super::client::{Fetched, Remote, fetch};
use super::error::Result;
use std::collections::VecDeque;
use tokio::task::JoinHandle;

/// One object to read: the operation its failure names, its name, and the
/// longest it may be (the length its manifest lists, capped).
pub(super) struct Want {
    pub op: &'static str,
    pub rel: String,
    pub max_len: u64,
}

/// The objects of [`Remote::read_ahead`], in order; see the module doc.
pub(super) struct ReadAhead<'r> {
    remote: &'r Remote,
    todo: VecDeque<Want>,
    /// Requested, oldest first: not yet handed out.
    pending: VecDeque<(Want, JoinHandle<Fetched>)>,
    /// Of the budget: the pending objects' `max_len`, plus the last one
    /// handed out (the caller checks it until it asks for the next).
    held: u64,
    handed: u64,
}

impl Remote {
    /// Reads `wants` with up to this remote's read-ahead in flight; the
    /// iterator yields each one's [`Remote::get`] answer in the order given.
    pub(super) fn read_ahead(&self, wants: Vec<Want>) -> ReadAhead<'_> {
        ReadAhead {
            remote: self,
            todo: wants.into(),
            pending: VecDeque::new(),
            held: 0,
            handed: 0,
        }
    }
}

impl ReadAhead<'_> {
    /// Starts requests while the limits allow: fewer than `requests` in
    /// flight, and the bytes held plus the next object's within `bytes`, or
    /// nothing held at all (an object over the budget goes alone).
    fn refill(&mut self) -> Result<()> {
        let (requests, bytes) = self.remote.read_ahead;
        while let Some(next) = self.todo.front() {
            let fits = self.held == 0 || self.held.saturating_add(next.max_len) <= bytes;
            if self.pending.len() >= requests || !fits {
                break;
            }
            let Some(want) = self.todo.pop_front() else {
                break;
            };
            let rt = super::client::runtime()?;
            let task = rt.spawn(fetch(
                self.remote.store.clone(),
                self.remote.path(&want.rel),
                want.max_len,
            ));
            self.held = self.held.saturating_add(want.max_len);
            self.pending.push_back((want, task));
        }
        Ok(())
    }

    fn next_answer(&mut self) -> Option<Result<Option<Vec<u8>>>> {
        self.held = self.held.saturating_sub(std::mem::take(&mut self.handed));
        if let Err(e) = self.refill() {
            return Some(Err(e));
        }
        let (want, mut task) = self.pending.pop_front()?;
        self.handed = want.max_len;
        let r = self.remote.block_on(async {
            (&mut task).await.unwrap_or_else(|e| {
                Err(object_store::Error::Generic {
                    store: "runlog-remote",
                    source: Box::new(e),
                })
            })
        });
        // Cut short (the deadline): the request goes with the reader.
        task.abort();
        Some(r.and_then(|r| self.remote.answer(want.op, &want.rel, want.max_len, r)))
    }
}

impl Iterator for ReadAhead<'_> {
    type Item = Result<Option<Vec<u8>>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_answer()
    }
}

impl Drop for ReadAhead<'_> {
    fn drop(&mut self) {
        for (_, task) in &self.pending {
            task.abort();
        }
    }
}
