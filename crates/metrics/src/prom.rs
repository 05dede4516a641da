//! Server-side numbers from a server's Prometheus histograms (ours or vLLM's): percentiles of
//! the requests of one level, from the difference of two scrapes.

use serde::{Deserialize, Serialize};

/// Cumulative bucket counts `(le, count)`, `le` ascending, the last `+Inf`.
pub type Buckets = [(f64, f64)];

/// Prometheus's `histogram_quantile`: the rank `q · total` is found in the bucket whose
/// cumulative count first reaches it, and interpolated linearly within that bucket (from 0
/// for the first). A rank in the `+Inf` bucket answers with the highest finite bound. `None`
/// without observations.
pub fn histogram_quantile(q: f64, buckets: &Buckets) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total;
    let (mut lo, mut below) = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lo);
            }
            let inside = count - below;
            return Some(if inside > 0.0 { lo + (le - lo) * (rank - below) / inside } else { le });
        }
        lo = if le.is_finite() { le } else { lo };
        below = count;
    }
    Some(lo)
}

/// `after − before`, bucket by bucket (a bucket missing before counts from zero).
pub fn delta(before: &Buckets, after: &Buckets) -> Vec<(f64, f64)> {
    after
        .iter()
        .map(|&(le, n)| {
            let b = before.iter().find(|x| x.0 == le || (x.0.is_infinite() && le.is_infinite())).map_or(0.0, |x| x.1);
            (le, (n - b).max(0.0))
        })
        .collect()
}

/// A histogram's requests over a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistogramStats {
    pub count: f64,
    /// `histogram_quantile` of the window: only as fine as the buckets.
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    /// The window's exact mean, `Δ_sum / Δ_count` (`None` without the `_sum` series). Unlike
    /// the quantiles it does not depend on the bucket bounds: vLLM's queue, prefill and decode
    /// histograms start with a (0, 0.3 s] bucket, so their P50 of millisecond times
    /// interpolates to about 0.15 s whatever the times were, while the mean stays exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// The first bucket's upper bound, when a quantile's rank fell inside it: that quantile
    /// is only known to lie below it (interpolating from 0 there invents a value — a queue of
    /// 0.0 ms mean would read 0.5 ms at P50), and is reported as the bound itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_bucket: Option<f64>,
}

impl HistogramStats {
    /// `q` (0.5, 0.9, 0.99) as a table writes it, scaled: `< 300.0` where it lies in the first
    /// bucket (an upper bound), else the bucket-interpolated value.
    pub fn quantile_text(&self, value: f64, scale: f64, digits: usize) -> String {
        match self.first_bucket {
            _ if !value.is_finite() => "-".into(),
            Some(le) if value <= le => format!("< {:.digits$}", le * scale),
            _ => format!("{:.digits$}", value * scale),
        }
    }
}

/// The stats of a window's buckets; `sum` is the window's `Δ_sum`, when the server exposes it.
pub fn stats(window: &Buckets, sum: Option<f64>) -> Option<HistogramStats> {
    let count = window.last()?.1;
    // The first bucket (0, le]: a quantile whose rank it holds is known only to be below le.
    let first = window.first().filter(|(le, _)| le.is_finite()).copied();
    let q = |p: f64| -> Option<(f64, bool)> {
        match first {
            Some((le, n)) if n >= p * count && n > 0.0 => Some((le, true)),
            _ => Some((histogram_quantile(p, window)?, false)),
        }
    };
    let (p50, p90, p99) = (q(0.5)?, q(0.9)?, q(0.99)?);
    let bounded = p50.1 || p90.1 || p99.1;
    Some(HistogramStats {
        count,
        p50: p50.0,
        p90: p90.0,
        p99: p99.0,
        mean: sum.filter(|s| s.is_finite() && count > 0.0).map(|s| s.max(0.0) / count),
        first_bucket: first.filter(|_| bounded).map(|(le, _)| le),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_quantiles_and_deltas() {
        let inf = f64::INFINITY;
        let b = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (inf, 40.0)];
        // Rank 20 lies in (0.1, 0.5] holding 10..30: 0.1 + 0.4 · 10/20 = 0.3.
        assert!((histogram_quantile(0.5, &b).unwrap() - 0.3).abs() < 1e-12);
        // Rank 39.6 in (0.5, 1.0] holding 30..40: 0.5 + 0.5 · 9.6/10 = 0.98.
        assert!((histogram_quantile(0.99, &b).unwrap() - 0.98).abs() < 1e-12);
        // Rank 5 in the first bucket: from 0, 0.1 · 5/10 = 0.05.
        assert!((histogram_quantile(0.125, &b).unwrap() - 0.05).abs() < 1e-12);
        // Beyond the last finite bound: that bound.
        let over = [(0.1, 1.0), (inf, 10.0)];
        assert_eq!(histogram_quantile(0.9, &over), Some(0.1));
        assert_eq!(histogram_quantile(0.5, &[(0.1, 0.0), (inf, 0.0)]), None);
        let before = [(0.1, 4.0), (0.5, 10.0), (1.0, 12.0), (inf, 12.0)];
        let d = delta(&before, &b);
        assert_eq!(d, vec![(0.1, 6.0), (0.5, 20.0), (1.0, 28.0), (inf, 28.0)]);
        // _sum went from 3.1 s to 10.1 s over the window: 7 s over 28 requests.
        let s = stats(&d, Some(10.1 - 3.1)).unwrap();
        assert_eq!(s.count, 28.0);
        // Rank 14 in (0.1, 0.5] holding 6..20: 0.1 + 0.4 · 8/14.
        assert!((s.p50 - (0.1 + 0.4 * 8.0 / 14.0)).abs() < 1e-12);
        assert!((s.mean.unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(stats(&d, None).unwrap().mean, None);
        // vLLM's queue-time buckets: ten 2 ms waits all in (0, 0.3]. The interpolated median
        // says 150 ms; the mean says 2 ms.
        let vllm = [(0.3, 10.0), (0.5, 10.0), (inf, 10.0)];
        assert!((histogram_quantile(0.5, &vllm).unwrap() - 0.15).abs() < 1e-12);
        // The stats say what the buckets know: every quantile below 300 ms, and the exact mean.
        let s = stats(&vllm, Some(0.02)).unwrap();
        assert_eq!((s.p50, s.p99, s.first_bucket), (0.3, 0.3, Some(0.3)));
        assert_eq!(s.quantile_text(s.p50, 1e3, 1), "< 300.0");
        assert!((s.mean.unwrap() - 0.002).abs() < 1e-12);
        // Above the first bucket, interpolated as before, and nothing bounded.
        let above = stats(&d, None).unwrap();
        assert_eq!(above.first_bucket, None);
        assert_eq!(above.quantile_text(above.p50, 1e3, 1), format!("{:.1}", above.p50 * 1e3));
    }
}
