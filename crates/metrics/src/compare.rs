//! Comparing two runs of the same workload, metric by metric, with the noise they show: a 95 %
//! bootstrap interval per run — a latency's over the level's requests resampled with
//! replacement, a rate's or throughput's over time blocks of its window
//! ([`crate::interval::block_bootstrap`]: resampling requests keeps the window and so gives a
//! count per window a zero-width interval) — and, when a side has repeats, the union of its
//! repeats' intervals. The side's value is the median over its repeats.
//!
//! A single run's interval never holds the run-to-run drift that separates two runs on one
//! machine (other work, clocks, caches), so a change is beyond the noise only when the two
//! sides' intervals do not overlap **and** it exceeds the noise: the stated noise floor
//! (`--noise-floor`, 10 % by default) when both sides are single runs, the spread of the
//! repeats ((max − min) ÷ median) when either side has them; and for times at least
//! [`TIME_RESOLUTION_S`].

use crate::level::{stat_value, summarize, Counted};
use crate::resample::Bootstrap;
use crate::slo::{parse_key, KeyError, Metric, Stat};
use goodput_core::ClientRecord;
use serde::Serialize;

/// What can be compared: a statistic of a contract metric, or a level throughput.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Key {
    Stat(Metric, Stat),
    OutputThroughput,
    RequestThroughput,
    Goodput,
}

impl Key {
    /// `ttft_p95`, `tpot_mean`, `error_rate`, `output_throughput`, `request_throughput`,
    /// `goodput`.
    pub fn parse(s: &str) -> Result<Key, KeyError> {
        Ok(match s {
            "output_throughput" => Key::OutputThroughput,
            "request_throughput" => Key::RequestThroughput,
            "goodput" => Key::Goodput,
            k => {
                let (m, st) = parse_key(k)?;
                Key::Stat(m, st)
            }
        })
    }

    pub fn name(&self) -> String {
        match self {
            Key::Stat(m, Stat::P(p)) => format!("{}_p{p}", m.name()),
            Key::Stat(m, Stat::Mean) => format!("{}_mean", m.name()),
            Key::Stat(m, Stat::Max) => format!("{}_max", m.name()),
            Key::Stat(m, Stat::Rate) => m.name().to_string(),
            Key::OutputThroughput => "output_throughput".into(),
            Key::RequestThroughput => "request_throughput".into(),
            Key::Goodput => "goodput".into(),
        }
    }

    pub fn higher_is_better(&self) -> bool {
        match self {
            Key::Stat(m, _) => m.higher_is_better(),
            _ => true,
        }
    }

    /// A time in seconds (a latency statistic).
    pub fn is_time(&self) -> bool {
        matches!(self, Key::Stat(m, _) if m.is_time())
    }

    /// Every key `--fail-on` and `--metrics` take, in words: the statistics of each latency,
    /// the rates and the throughputs.
    pub fn accepted() -> String {
        let stats: Vec<String> = Metric::ALL
            .iter()
            .filter(|m| !m.is_rate())
            .map(|m| format!("{}_{{p50,p90,p95,p99,mean,max}}", m.name()))
            .collect();
        format!("{}, error_rate, timeout_rate, output_throughput, request_throughput, goodput", stats.join(", "))
    }

    /// The value over `records`, by the contract's own definitions (`level::stat_value`,
    /// `level::summarize`).
    pub fn value(&self, records: &[&ClientRecord]) -> Option<f64> {
        match *self {
            Key::Stat(metric, stat) => stat_value(records, metric, stat),
            Key::OutputThroughput => Some(summarize(0.0, records, &[]).output_throughput),
            Key::RequestThroughput => Some(summarize(0.0, records, &[]).request_throughput),
            Key::Goodput => Some(summarize(0.0, records, &[]).goodput),
        }
    }
}

/// The keys compared when none are named.
pub const DEFAULT_KEYS: [&str; 11] = [
    "ttft_p50",
    "ttft_p95",
    "ttft_p99",
    "tpot_p50",
    "tpot_p95",
    "itl_p95",
    "e2e_p95",
    "queue_time_p95",
    "prefill_time_p95",
    "output_throughput",
    "request_throughput",
];

/// Changes in a time smaller than this are noise whatever their ratio: a queue time of 0.01 ms
/// against 0.03 ms is not a 200 % regression.
pub const TIME_RESOLUTION_S: f64 = 0.001;

/// The default noise floor of a comparison of single runs: the run-to-run drift of one
/// machine that a run's own interval cannot show.
pub const DEFAULT_NOISE_FLOOR: f64 = 0.10;

/// A 95 % interval of `key` over `records` (`rounds` resamples, seeded): a latency's or
/// rate's by resampling requests, a throughput's by resampling time blocks.
pub fn bootstrap(records: &[&ClientRecord], key: Key, rounds: usize, seed: u64) -> Option<(f64, f64)> {
    if records.is_empty() {
        return None;
    }
    if !matches!(key, Key::Stat(..)) {
        // Goodput without SLOs is the completion rate: counted like requests.
        let what = if key == Key::OutputThroughput { Counted::OutputTokens } else { Counted::Requests };
        let i = crate::level::throughput_interval(records, what, rounds, seed)?;
        return Some((i.lo?, i.hi?));
    }
    let n = records.len();
    let mut values: Vec<f64> = Vec::with_capacity(rounds);
    let mut sample: Vec<&ClientRecord> = Vec::with_capacity(n);
    let mut draws = Bootstrap::new(n, seed);
    for _ in 0..rounds {
        sample.clear();
        sample.extend(draws.next_sample().iter().map(|&i| records[i]));
        if let Some(v) = key.value(&sample) {
            values.push(v);
        }
    }
    Some((crate::percentile(&values, 2.5)?, crate::percentile(&values, 97.5)?))
}

/// One metric of one level in both runs.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub key: String,
    pub a: f64,
    pub b: f64,
    /// b / a.
    pub ratio: f64,
    pub a_interval: (f64, f64),
    pub b_interval: (f64, f64),
    /// The intervals do not overlap and the change exceeds `noise` (and, for times,
    /// [`TIME_RESOLUTION_S`]).
    pub beyond_noise: bool,
    /// The relative change taken as noise: the repeats' spread, or the noise floor.
    pub noise: f64,
    /// `noise` is the spread of a side's repeats (not the floor).
    pub noise_from_repeats: bool,
    /// b is worse than a (by the metric's direction).
    pub worse: bool,
}

impl Row {
    /// The change from a to b as a signed fraction (+0.1 = 10 % larger).
    pub fn change(&self) -> f64 {
        self.ratio - 1.0
    }
}

/// One side: its value (median over repeats), noise interval (union of the repeats'
/// intervals) and the repeats' spread ((max − min) ÷ median; `None` for a single run).
struct Side {
    value: f64,
    interval: (f64, f64),
    spread: Option<f64>,
}

fn side(repeats: &[Vec<&ClientRecord>], k: Key, rounds: usize, seed: u64) -> Option<Side> {
    let mut values = Vec::new();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (i, r) in repeats.iter().enumerate() {
        values.push(k.value(r)?);
        let (l, h) = bootstrap(r, k, rounds, seed + 2 * i as u64)?;
        lo = lo.min(l);
        hi = hi.max(h);
    }
    let value = crate::percentile(&values, 50.0)?;
    let (min, max) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    let spread = (values.len() > 1).then(|| if value != 0.0 { (max - min) / value.abs() } else { 0.0 });
    Some(Side { value, interval: (lo, hi), spread })
}

/// Compares `keys` between the records of one level in two runs, with `floor` as the noise.
pub fn compare(a: &[&ClientRecord], b: &[&ClientRecord], keys: &[Key], rounds: usize, floor: f64) -> Vec<Row> {
    compare_repeats(&[a.to_vec()], &[b.to_vec()], keys, rounds, floor)
}

/// b / a, where a change from 0 is infinite (an error rate from 0 % to 100 % is worse without
/// bound, never NaN) and 0 to 0 is no change.
fn ratio(a: f64, b: f64) -> f64 {
    if a != 0.0 {
        b / a
    } else if b == 0.0 {
        1.0
    } else {
        b.signum() * f64::INFINITY
    }
}

/// Compares `keys` between one level's records in the repeats of two sides; a key that a
/// side has no value for (no request of the level has the metric) gives no row. The noise is
/// the larger repeats' spread where a side has repeats, else `floor`.
pub fn compare_repeats(
    a: &[Vec<&ClientRecord>],
    b: &[Vec<&ClientRecord>],
    keys: &[Key],
    rounds: usize,
    floor: f64,
) -> Vec<Row> {
    keys.iter()
        .filter_map(|&k| {
            let (sa, sb) = (side(a, k, rounds, 1)?, side(b, k, rounds, 1_000)?);
            let (va, vb, ia, ib) = (sa.value, sb.value, sa.interval, sb.interval);
            let spread = sa.spread.into_iter().chain(sb.spread).reduce(f64::max);
            let noise = spread.unwrap_or(floor);
            let disjoint = ia.1 < ib.0 || ib.1 < ia.0;
            let resolution = if k.is_time() { TIME_RESOLUTION_S } else { 0.0 };
            let beyond_noise = disjoint && (vb - va).abs() > (noise * va.abs()).max(resolution);
            let worse = if k.higher_is_better() { vb < va } else { vb > va };
            Some(Row {
                key: k.name(),
                a: va,
                b: vb,
                ratio: ratio(va, vb),
                a_interval: ia,
                b_interval: ib,
                beyond_noise,
                noise,
                noise_from_repeats: spread.is_some(),
                worse,
            })
        })
        .collect()
}

/// `--fail-on ttft_p95=+10%`: the run fails when the key gets worse by more than `worse_by`
/// (a fraction) and beyond the noise.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub key: Key,
    pub worse_by: f64,
}

/// Why a `--fail-on` list is not one; each names the part it is about.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ThresholdError {
    #[error("`{part}`: expected KEY=+N%, e.g. ttft_p95=+10%")]
    NotKeyValue { part: String },
    #[error("`{part}`: {source}; --fail-on takes {accepted}", accepted = Key::accepted())]
    Key { part: String, source: KeyError },
    #[error("`{part}`: `{value}` is not a signed percentage (+10%, -5%): the sign says which way is worse")]
    NotPercentage { part: String, value: String },
    #[error("`{part}`: {key} gets worse as it {direction}; write {sign}{pct}%")]
    WrongSign { part: String, key: String, direction: &'static str, sign: char, pct: f64 },
}

/// Parses `ttft_p95=+10%,output_throughput=-5%` (the sign says which way is worse and must
/// agree with the metric's direction).
pub fn parse_thresholds(s: &str) -> Result<Vec<Threshold>, ThresholdError> {
    s.split(',').map(str::trim).filter(|p| !p.is_empty()).map(parse_threshold).collect()
}

fn parse_threshold(part: &str) -> Result<Threshold, ThresholdError> {
    let (k, v) = part.split_once('=').ok_or_else(|| ThresholdError::NotKeyValue { part: part.into() })?;
    let key = Key::parse(k.trim()).map_err(|source| ThresholdError::Key { part: part.into(), source })?;
    let v = v.trim();
    let pct: f64 = v
        .strip_suffix('%')
        .filter(|x| x.starts_with(['+', '-']))
        .and_then(|x| x.trim().parse().ok())
        .filter(|x: &f64| x.is_finite() && *x != 0.0)
        .ok_or_else(|| ThresholdError::NotPercentage { part: part.into(), value: v.into() })?;
    let expect_up = !key.higher_is_better();
    if (pct > 0.0) != expect_up {
        return Err(ThresholdError::WrongSign {
            part: part.into(),
            key: key.name(),
            direction: if expect_up { "rises" } else { "falls" },
            sign: if expect_up { '+' } else { '-' },
            pct: pct.abs(),
        });
    }
    Ok(Threshold { key, worse_by: pct.abs() / 100.0 })
}

/// Whether `row` breaks `t`. A row whose values are not numbers breaks every threshold on its
/// key: a gate fails closed.
pub fn breaks(row: &Row, t: &Threshold) -> bool {
    if row.key != t.key.name() {
        return false;
    }
    let judged = row.a.is_finite() && row.b.is_finite() && !row.ratio.is_nan();
    !judged || (row.worse && row.beyond_noise && row.change().abs() > t.worse_by)
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{Outcome, RecordBuilder, Stamp};

    /// A request of `ttft_ms` to its first of 11 tokens, 10 ms apart.
    fn rec(id: u64, ttft_ms: u64) -> ClientRecord {
        let ms = |x: u64| Stamp(x * 1_000_000);
        RecordBuilder::new(id).input(10).end(ms(ttft_ms + 100)).tokens_at((0..11).map(|i| ms(ttft_ms + 10 * i))).build()
    }

    #[test]
    fn keys_parse_and_thresholds_know_their_direction() {
        assert_eq!(Key::parse("ttft_p95").unwrap(), Key::Stat(Metric::Ttft, Stat::P(95.0)));
        assert_eq!(Key::parse("output_throughput").unwrap(), Key::OutputThroughput);
        assert_eq!(Key::parse("ttft_p95").unwrap().name(), "ttft_p95");
        assert!(Key::parse("latency").is_err());
        let t = parse_thresholds("ttft_p95=+10%,output_throughput=-5%").unwrap();
        assert_eq!(t[0].worse_by, 0.1);
        assert!(parse_thresholds("ttft_p95=-10%").unwrap_err().to_string().contains("+10%"));
        assert!(parse_thresholds("output_throughput=+5%").unwrap_err().to_string().contains("-5%"));
        assert!(parse_thresholds("ttft_p95=10").is_err());
    }

    #[test]
    fn a_shift_beyond_the_spread_is_a_regression_and_the_same_data_is_not() {
        // A: TTFT 100–139 ms; B: the same shifted by +50 ms.
        let a: Vec<ClientRecord> = (0..40).map(|i| rec(i, 100 + i)).collect();
        let b: Vec<ClientRecord> = (0..40).map(|i| rec(i, 150 + i)).collect();
        let (ra, rb): (Vec<&ClientRecord>, Vec<&ClientRecord>) = (a.iter().collect(), b.iter().collect());
        let keys = [Key::parse("ttft_p50").unwrap(), Key::parse("tpot_p50").unwrap()];
        let rows = compare(&ra, &rb, &keys, 200, DEFAULT_NOISE_FLOOR);
        let ttft = &rows[0];
        // Medians 119.5 and 169.5 ms (linear interpolation).
        assert!((ttft.a - 0.1195).abs() < 1e-9 && (ttft.b - 0.1695).abs() < 1e-9, "{ttft:?}");
        assert!(ttft.worse && ttft.beyond_noise);
        let t = parse_thresholds("ttft_p50=+10%").unwrap();
        assert!(breaks(ttft, &t[0]));
        assert!(!breaks(ttft, &parse_thresholds("ttft_p50=+50%").unwrap()[0]), "a 42 % change is under 50 %");
        // TPOT is the same 10 ms in both: not worse, within noise.
        assert!(!rows[1].beyond_noise && (rows[1].ratio - 1.0).abs() < 1e-9);
        let same = compare(&ra, &ra, &keys, 200, DEFAULT_NOISE_FLOOR);
        assert!(same.iter().all(|r| !r.beyond_noise));
        // Repeats: A's second run drifted +30 ms; the union of its intervals now reaches B's
        // (+50 ms), and A's value is the median of its repeats (119.5 and 149.5: 134.5).
        let drift: Vec<ClientRecord> = (0..40).map(|i| rec(i, 130 + i)).collect();
        let rd: Vec<&ClientRecord> = drift.iter().collect();
        let rows = compare_repeats(&[ra.clone(), rd], std::slice::from_ref(&rb), &keys[..1], 200, DEFAULT_NOISE_FLOOR);
        assert!((rows[0].a - 0.1345).abs() < 1e-9, "{:?}", rows[0]);
        assert!(rows[0].a_interval.1 > 0.145, "{:?}", rows[0]);
    }

    /// `n` requests, one every `gap_ms`, each 100 ms long with 11 tokens.
    fn paced(n: u64, gap_ms: u64) -> Vec<ClientRecord> {
        let ms = |x: u64| Stamp(x * 1_000_000);
        (0..n)
            .map(|i| {
                let t0 = i * gap_ms;
                RecordBuilder::new(i)
                    .intended(ms(t0))
                    .input(10)
                    .end(ms(t0 + 100))
                    .tokens_at((0..11).map(|k| ms(t0 + 10 + 9 * k)))
                    .build()
            })
            .collect()
    }

    /// The false alarm: two runs whose rates differ by 4 % each had an interval of
    /// zero width, so the gate called it a regression. Now a rate's interval comes from time
    /// blocks, and a change within the noise floor is noise; a 2× slowdown is not.
    #[test]
    fn a_rate_has_a_real_interval_and_a_small_drift_is_noise() {
        let (a, b) = (paced(200, 50), paced(200, 52));
        let (ra, rb): (Vec<&ClientRecord>, Vec<&ClientRecord>) = (a.iter().collect(), b.iter().collect());
        let keys = [Key::RequestThroughput, Key::OutputThroughput];
        let rows = compare(&ra, &rb, &keys, 300, DEFAULT_NOISE_FLOOR);
        for r in &rows {
            assert!(r.a_interval.1 > r.a_interval.0, "{r:?}");
            assert!(r.worse && !r.beyond_noise, "a 4 % drift is within the 10 % floor: {r:?}");
        }
        let slow = paced(200, 100);
        let rs: Vec<&ClientRecord> = slow.iter().collect();
        let rows = compare(&ra, &rs, &keys, 300, DEFAULT_NOISE_FLOOR);
        assert!(rows.iter().all(|r| r.worse && r.beyond_noise), "{rows:?}");
        let t = parse_thresholds("request_throughput=-10%").unwrap();
        assert!(breaks(&rows[0], &t[0]));
        // A threshold takes a sign, and a key it does not know lists those it does.
        assert!(parse_thresholds("request_throughput=10%").unwrap_err().to_string().contains("signed"));
        let e = parse_thresholds("latency_p95=+10%").unwrap_err().to_string();
        assert!(e.contains("output_throughput") && e.contains("ttft_{p50"), "{e}");
    }

    #[test]
    fn a_rate_from_zero_is_an_infinite_change_and_breaks_its_gate() {
        let a: Vec<ClientRecord> = (0..20).map(|i| rec(i, 100)).collect();
        let b: Vec<ClientRecord> = (0..20)
            .map(|i| {
                let mut r = rec(i, 100);
                r.outcome = Outcome::error(goodput_core::FailureKind::Http(500), "HTTP 500");
                r
            })
            .collect();
        let (ra, rb): (Vec<&ClientRecord>, Vec<&ClientRecord>) = (a.iter().collect(), b.iter().collect());
        let rows = compare(&ra, &rb, &[Key::parse("error_rate").unwrap()], 100, DEFAULT_NOISE_FLOOR);
        let row = &rows[0];
        assert_eq!((row.a, row.b, row.ratio), (0.0, 1.0, f64::INFINITY));
        assert!(row.worse && row.beyond_noise);
        assert!(breaks(row, &parse_thresholds("error_rate=+1%").unwrap()[0]));
        let same = compare(&ra, &ra, &[Key::parse("error_rate").unwrap()], 100, DEFAULT_NOISE_FLOOR);
        assert_eq!(same[0].ratio, 1.0, "0 → 0 is no change");
        let nan = Row { a: f64::NAN, ..row.clone() };
        assert!(breaks(&nan, &parse_thresholds("error_rate=+50%").unwrap()[0]), "not a number fails closed");
    }
}
