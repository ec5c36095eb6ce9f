//! The merge of sorted sources in key order where the newest source wins a key
//! (FORMAT.md §14.3): the tables of a chain, oldest first, then the overlay.
//! Iteration over a keyed state and the writing of a table both take their
//! next entry here, so "smallest key; newest copy wins; older copies skipped"
//! is written once.

use crate::engine::error::Result;

/// One sorted source of a merge.
pub(crate) trait Source {
    /// What the source yields for a key.
    type Entry;
    /// The key of the next entry, or `None` once the source is exhausted; a
    /// damaged source returns its error (and is not read again by the merge).
    fn peek_key(&mut self) -> Result<Option<&[u8]>>;
    /// Takes the next entry (the one `peek_key` named).
    fn pop(&mut self) -> Option<Self::Entry>;
}

impl<S: Source + ?Sized> Source for Box<S> {
    type Entry = S::Entry;
    fn peek_key(&mut self) -> Result<Option<&[u8]>> {
        (**self).peek_key()
    }
    fn pop(&mut self) -> Option<S::Entry> {
        (**self).pop()
    }
}

/// Takes the smallest key any source holds, from the newest source holding it
/// (the greatest index), skipping the older copies of that key in the others.
/// Returns the winning source's index and its entry, `None` once every source
/// is exhausted.
pub(crate) fn pop_newest<S: Source>(sources: &mut [S]) -> Result<Option<(usize, S::Entry)>> {
    let mut best: Option<(Vec<u8>, usize)> = None;
    for (i, s) in sources.iter_mut().enumerate() {
        if let Some(k) = s.peek_key()?
            && best.as_ref().is_none_or(|(b, _)| k <= b.as_slice())
        {
            best = Some((k.to_vec(), i));
        }
    }
    let Some((key, winner)) = best else {
        return Ok(None);
    };
    let mut entry = None;
    for (i, s) in sources.iter_mut().enumerate() {
        if s.peek_key()? == Some(key.as_slice()) {
            let e = s.pop();
            if i == winner {
                entry = e;
            }
        }
    }
    Ok(entry.map(|e| (winner, e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::error::Error;

    /// A source over a sorted list of (key, tag), failing at `fail_at` if set.
    struct List {
        items: std::collections::VecDeque<(Vec<u8>, &'static str)>,
        fail_at: Option<usize>,
        taken: usize,
    }

    fn list(items: &[(&str, &'static str)]) -> List {
        List {
            items: items
                .iter()
                .map(|(k, t)| (k.as_bytes().to_vec(), *t))
                .collect(),
            fail_at: None,
            taken: 0,
        }
    }

    impl Source for List {
        type Entry = &'static str;
        fn peek_key(&mut self) -> Result<Option<&[u8]>> {
            if self.fail_at == Some(self.taken) {
                return Err(Error::Corrupt {
                    path: "list".into(),
                    offset: Some(self.taken as u64),
                    seq: None,
                    reason: "damaged".into(),
                });
            }
            Ok(self.items.front().map(|(k, _)| k.as_slice()))
        }
        fn pop(&mut self) -> Option<&'static str> {
            self.taken += 1;
            self.items.pop_front().map(|(_, t)| t)
        }
    }

    fn drain(sources: &mut [List]) -> Vec<(usize, &'static str)> {
        std::iter::from_fn(|| pop_newest(sources).unwrap()).collect()
    }

    #[test]
    fn the_newest_source_wins_each_key_and_older_copies_are_skipped() {
        let mut s = [
            list(&[("a", "a0"), ("b", "b0"), ("d", "d0")]),
            list(&[("b", "b1"), ("c", "c1")]),
            list(&[("b", "b2"), ("d", "d2"), ("e", "e2")]),
        ];
        assert_eq!(
            drain(&mut s),
            [(0, "a0"), (2, "b2"), (1, "c1"), (2, "d2"), (2, "e2")]
        );
        assert!(s.iter().all(|l| l.items.is_empty()));
    }

    #[test]
    fn no_sources_or_empty_ones_yield_nothing() {
        assert_eq!(drain(&mut []), []);
        assert_eq!(drain(&mut [list(&[]), list(&[])]), []);
    }

    #[test]
    fn a_damaged_source_is_an_error_not_an_end() {
        let mut s = [list(&[("a", "a0"), ("b", "b0")]), list(&[("c", "c1")])];
        s[0].fail_at = Some(1);
        assert_eq!(pop_newest(&mut s).unwrap(), Some((0, "a0")));
        assert!(pop_newest(&mut s).is_err());
    }
}
