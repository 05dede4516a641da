//! The Pareto frontier of operating points, the chart the field reads since InferenceMAX:
//! output throughput per GPU against output tokens per second per user. A point is on the
//! frontier when no other point is at least as good on both axes and better on one; every
//! point under it is a configuration (or load) that gives up something for nothing.

/// Whether `q` dominates `p`: at least as good on both axes and better on one, higher being
/// better on both (negate an axis where lower is better). A NaN coordinate never dominates
/// and is never dominated.
pub fn dominates(q: (f64, f64), p: (f64, f64)) -> bool {
    q.0 >= p.0 && q.1 >= p.1 && (q.0 > p.0 || q.1 > p.1)
}

/// For each point, whether it is on the frontier: no other point dominates it. Points with a
/// coordinate that is not finite are never on it.
pub fn on_frontier(points: &[(f64, f64)]) -> Vec<bool> {
    let finite = |p: &(f64, f64)| p.0.is_finite() && p.1.is_finite();
    points.iter().map(|p| finite(p) && !points.iter().filter(|q| finite(q)).any(|q| dominates(*q, *p))).collect()
}

/// The frontier's points, by the first axis ascending (so a line through them is the
/// frontier's staircase, highest throughput at the lowest speed per user first when the
/// first axis is speed per user); equal points once.
pub fn frontier(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> =
        points.iter().zip(on_frontier(points)).filter(|(_, on)| *on).map(|(p, _)| *p).collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frontier_by_hand() {
        // (tok/s per user, tok/s per GPU): A (10, 900), B (20, 700), C (15, 600) under B,
        // D (30, 300), E (30, 200) under D, F (5, 900) under A (same throughput, slower).
        let pts = [(10.0, 900.0), (20.0, 700.0), (15.0, 600.0), (30.0, 300.0), (30.0, 200.0), (5.0, 900.0)];
        assert_eq!(on_frontier(&pts), [true, true, false, true, false, false]);
        assert_eq!(frontier(&pts), [(10.0, 900.0), (20.0, 700.0), (30.0, 300.0)]);
        assert!(dominates((2.0, 2.0), (1.0, 2.0)) && !dominates((2.0, 2.0), (2.0, 2.0)));
        assert!(!dominates((3.0, 1.0), (1.0, 3.0)), "a trade-off dominates nothing");
        // Equal points are both on it, and listed once; NaN is never on it.
        assert_eq!(on_frontier(&[(1.0, 1.0), (1.0, 1.0), (f64::NAN, 5.0)]), [true, true, false]);
        assert_eq!(frontier(&[(1.0, 1.0), (1.0, 1.0)]), [(1.0, 1.0)]);
        assert!(frontier(&[]).is_empty());
    }
}
