//! The demo's plan: a dependency graph of units and the work each one does.
//! Pure and deterministic, so the supervisor can check results independently.

/// The name of unit `i` (1-based), zero-padded so names sort in plan order.
pub fn unit_name(i: usize) -> String {
    format!("u{i:06}")
}

/// The dependencies of unit `i`: a tree (each unit depends on its parent
/// `i / 2`), so the graph has long chains and wide fan-out at once.
pub fn deps_of(i: usize) -> Vec<String> {
    if i >= 2 {
        vec![unit_name(i / 2)]
    } else {
        vec![]
    }
}

/// The result a unit commits with its `done` transition: a digest of its name
/// and its parent's, standing in for real work (a file written, a row loaded).
pub fn result_of(unit: &str) -> String {
    let mut h = crc32fast::Hasher::new();
    for _ in 0..64 {
        h.update(unit.as_bytes());
    }
    format!("crc={:08x}", h.finalize())
}

/// A tiny deterministic PRNG (xorshift64*), for kill timing.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (0 is mapped to a fixed non-zero seed).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `lo..hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo)
        }
    }
}

/// The points (counts of units done) at which the supervisor kills the worker:
/// `kills` distinct values spread over the middle of the run, ascending.
pub fn kill_points(units: usize, kills: usize, rng: &mut Rng) -> Vec<usize> {
    // Distinct points in 1..units-1 (Floyd's sampling): each is one kill, so
    // `kills` points give `kills` kills. [`max_kills`] bounds what is asked.
    let n = units.saturating_sub(2) as u64;
    let k = (kills as u64).min(n);
    let mut picked = std::collections::BTreeSet::new();
    for j in n - k..n {
        let t = rng.range(0, j + 1);
        if !picked.insert(t) {
            picked.insert(j);
        }
    }
    picked.into_iter().map(|p| p as usize + 1).collect()
}

/// The most kills a demo of `units` units can make: one per distinct number
/// of units done strictly between the first and the last.
pub fn max_kills(units: usize) -> usize {
    units.saturating_sub(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_points_are_as_many_as_asked_and_distinct() {
        let mut rng = Rng::new(7);
        for (units, kills) in [(5, 3), (4, 2), (100, 98), (5000, 3), (10, 0)] {
            let p = kill_points(units, kills, &mut rng);
            assert_eq!(p.len(), kills, "{units} units, {kills} kills: {p:?}");
            assert!(p.windows(2).all(|w| w[0] < w[1]));
            assert!(p.iter().all(|&x| x >= 1 && x < units - 1), "{p:?}");
        }
        assert_eq!(max_kills(5), 3);
    }

    #[test]
    fn tree_dependencies_point_at_earlier_units() {
        assert!(deps_of(1).is_empty());
        assert_eq!(deps_of(7), vec![unit_name(3)]);
    }

    #[test]
    fn kill_points_are_inside_the_run() {
        let mut r = Rng::new(7);
        let p = kill_points(1000, 5, &mut r);
        assert!(!p.is_empty() && p.iter().all(|&x| (1..999).contains(&x)));
        assert!(p.windows(2).all(|w| w[0] < w[1]));
    }
}
