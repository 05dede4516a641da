//! Usable capacity, limit capacity and the queueing knee of a sweep of load levels.

use serde::{Deserialize, Serialize};

/// What a capacity decision needs of one load level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LevelOutcome {
    /// The load: concurrency or request rate.
    pub load: f64,
    /// Whether every SLO held at this level (the point estimates).
    pub slos_hold: bool,
    /// Whether every SLO held with 95 % confidence ([`crate::interval::Confidence`]): what
    /// usable capacity asks of a level.
    pub surely_holds: bool,
    /// The most any SLO used of its bound (value ÷ bound; [`crate::level::SloResult::used`]):
    /// where a refinement interpolates. 0 without SLOs.
    #[serde(default)]
    pub slo_used: f64,
    /// Output tokens per second over the level's steady window.
    pub output_throughput: f64,
    /// The level's queue time (seconds), if known: see [`level_queue_time`].
    pub queue_time: Option<f64>,
}

/// Where a level's queue time comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueSource {
    /// The median of the requests' own waits (`engine_wait` = first_scheduled − arrival:
    /// handoff plus queue), from the engine's stamps: in-process, or a server that returns
    /// them per request (goodput's).
    EngineStamps,
    /// The mean of the server's queue-time histogram over the level (`Δ_sum / Δ_count` of two
    /// /metrics scrapes): a server known only through its /metrics (vLLM, SGLang).
    ServerMetrics,
}

/// A level's wait for the knee: the median of the requests' engine waits (handoff + queue)
/// where the engine's stamps are known; otherwise the exact mean of the server's queue-time
/// histogram over the level. Not its interpolated median: vLLM's first queue-time bucket is
/// (0, 0.3 s], so that median of millisecond waits reads about 150 ms at every load and
/// would hide the knee. Both are near zero without queueing and grow with it.
pub fn level_queue_time(engine_p50: Option<f64>, server_mean: Option<f64>) -> Option<(f64, QueueSource)> {
    match (engine_p50, server_mean) {
        (Some(q), _) => Some((q, QueueSource::EngineStamps)),
        (None, Some(q)) => Some((q, QueueSource::ServerMetrics)),
        (None, None) => None,
    }
}

/// `usable_capacity`: the highest load whose SLOs all hold with 95 % confidence, at which
/// every lower level's do too — the last such level before the first that does not (loads
/// ascending), so neither a noisy pass above a failure nor a pass whose interval reaches past
/// a bound is reported as capacity. `None` when the lowest level is not shown to hold.
pub fn usable_capacity(levels: &[LevelOutcome]) -> Option<f64> {
    let mut sorted: Vec<&LevelOutcome> = levels.iter().collect();
    sorted.sort_by(|a, b| a.load.total_cmp(&b.load));
    sorted.iter().take_while(|l| l.surely_holds).last().map(|l| l.load)
}

/// A search's step from a level that held, whose SLO nearest its bound used `used` of it
/// (value ÷ bound: 0.96 for a P95 TPOT of 48 ms against 50 ms): ×4 while every SLO uses under
/// a quarter of its bound, ×2 in between, and past 55 % the step to where that SLO would reach
/// 110 % of its bound if it grew in proportion to the load (between ×1.05 and ×2): a level just
/// past the limit, not one far beyond it.
pub fn search_step(used: f64) -> f64 {
    match used {
        u if !u.is_finite() => 2.0,
        u if u < 0.25 => 4.0,
        u if u > 0.55 => (1.1 / u).clamp(1.05, 2.0),
        _ => 2.0,
    }
}

/// Two sweeps of one setup whose capacities cannot both be right: one side's usable capacity
/// (held there and at every level below, with confidence) is at or above a load where the
/// other side's SLOs broke (the point estimate). `run` and `capacity`, or one run today and
/// one tomorrow, must not contradict each other on the same setup; when they do, the machine
/// or the target changed between them, and neither figure stands alone.
#[derive(Clone, Debug, PartialEq)]
pub struct Contradiction {
    /// Which side held: 0 for the first, 1 for the second.
    pub held_by: usize,
    /// Its usable capacity, and the lowest load at or below it where the other side broke.
    pub usable: f64,
    pub broke_at: f64,
}

/// [`Contradiction`] between the level outcomes of two sweeps; `None` when their brackets
/// agree (each side's usable capacity is below every load where the other broke).
pub fn contradiction(a: &[LevelOutcome], b: &[LevelOutcome]) -> Option<Contradiction> {
    let check = |held_by: usize, holds: &[LevelOutcome], broke: &[LevelOutcome]| {
        let usable = usable_capacity(holds)?;
        let broke_at = broke.iter().filter(|l| !l.slos_hold && l.load <= usable).map(|l| l.load).reduce(f64::min)?;
        Some(Contradiction { held_by, usable, broke_at })
    };
    check(0, a, b).or_else(|| check(1, b, a))
}

/// Whether a sweep found its limit: what its usable capacity means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    /// A level above usable capacity did not hold with confidence: the limit lies between.
    Found,
    /// Every level held with confidence: usable capacity is at least the highest level run.
    NotReached,
    /// The lowest level did not hold with confidence: usable capacity is below it.
    BelowLowest,
}

/// [`Reach`] of `levels`, with the first load (ascending) whose SLOs did not hold with
/// confidence; `None` without levels.
pub fn reach(levels: &[LevelOutcome]) -> Option<(Reach, Option<f64>)> {
    let mut sorted: Vec<&LevelOutcome> = levels.iter().collect();
    sorted.sort_by(|a, b| a.load.total_cmp(&b.load));
    let first = sorted.first()?;
    let unsure = sorted.iter().find(|l| !l.surely_holds).map(|l| l.load);
    Some(match unsure {
        None => (Reach::NotReached, None),
        Some(u) if u == first.load => (Reach::BelowLowest, Some(u)),
        Some(u) => (Reach::Found, Some(u)),
    })
}

/// Levels whose SLOs held with confidence above a lower level where they did not: a sweep
/// that is not monotone (noise, a warming cache, a machine that got busier or quieter).
pub fn holds_above_a_break(levels: &[LevelOutcome]) -> Vec<f64> {
    let mut sorted: Vec<&LevelOutcome> = levels.iter().collect();
    sorted.sort_by(|a, b| a.load.total_cmp(&b.load));
    let Some(first) = sorted.iter().position(|l| !l.surely_holds) else { return Vec::new() };
    sorted[first..].iter().filter(|l| l.surely_holds).map(|l| l.load).collect()
}

/// `limit_capacity`: the load of maximum output throughput (the first such, on ties); `None`
/// when no level produced any (every request failed: there is no limit to name).
pub fn limit_capacity(levels: &[LevelOutcome]) -> Option<f64> {
    let mut best: Option<&LevelOutcome> = None;
    for l in levels.iter().filter(|l| l.output_throughput > 0.0) {
        if best.is_none_or(|b| l.output_throughput > b.output_throughput) {
            best = Some(l);
        }
    }
    best.map(|l| l.load)
}

/// The knee: the first load (ascending) whose queue time exceeds both twice the
/// lowest level's and that plus `min_rise` seconds — where requests start to wait.
/// `None` if queueing never rises that much.
pub fn queue_knee(levels: &[LevelOutcome], min_rise: f64) -> Option<f64> {
    let mut sorted: Vec<(f64, f64)> = levels.iter().filter_map(|l| Some((l.load, l.queue_time?))).collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let &(_, base) = sorted.first()?;
    sorted.iter().skip(1).find(|(_, q)| *q > 2.0 * base && *q > base + min_rise).map(|(load, _)| *load)
}

/// The last load (ascending) before the knee: up to here there is no queueing to speak of.
pub fn last_without_queueing(levels: &[LevelOutcome], min_rise: f64) -> Option<f64> {
    let knee = queue_knee(levels, min_rise);
    let mut loads: Vec<f64> = levels.iter().filter(|l| l.queue_time.is_some()).map(|l| l.load).collect();
    loads.sort_by(f64::total_cmp);
    match knee {
        Some(k) => loads.into_iter().take_while(|&l| l < k).last(),
        None => loads.last().copied(),
    }
}

/// The knee's threshold: a queue-time rise of at least this many seconds (on top of
/// doubling) marks where requests start to wait.
pub const KNEE_MIN_RISE: f64 = 0.010;

/// The last passing and the first failing load (ascending), a pass being a level whose SLOs
/// hold with confidence: where a refinement bisects, and the bracket [`usable_capacity`] sits
/// in. `None` while every level passes or the lowest fails.
pub fn pass_fail(levels: &[LevelOutcome]) -> Option<(f64, f64)> {
    pass_fail_levels(levels).map(|(p, f)| (p.load, f.load))
}

/// [`pass_fail`]'s two levels.
pub fn pass_fail_levels(levels: &[LevelOutcome]) -> Option<(&LevelOutcome, &LevelOutcome)> {
    let mut sorted: Vec<&LevelOutcome> = levels.iter().collect();
    sorted.sort_by(|a, b| a.load.total_cmp(&b.load));
    let first_fail = sorted.iter().position(|l| !l.surely_holds)?;
    Some((sorted[..first_fail].last()?, sorted[first_fail]))
}

/// Where a refinement tries next between the last passing load `pass` and the first failing
/// one `fail` (ascending), whose SLOs used `used_pass` and `used_fail` of their bounds: where
/// the SLO would use 97 % of its bound by linear interpolation between them (regula falsi,
/// aiming just inside the limit), kept at least an eighth of the bracket from either end; the
/// midpoint when the two do not rise (noise, or no SLO values).
pub fn refine_point(pass: (f64, f64), fail: (f64, f64)) -> f64 {
    let ((p, up), (f, uf)) = (pass, fail);
    let mid = (p + f) / 2.0;
    if !(up.is_finite() && uf.is_finite() && uf > up) {
        return mid;
    }
    let x = p + (0.97 - up) / (uf - up) * (f - p);
    let margin = (f - p) / 8.0;
    if x.is_finite() {
        x.clamp(p + margin, f - margin)
    } else {
        mid
    }
}

/// A throughput's value and 95 % interval at a load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    pub load: f64,
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

/// Dips: loads (ascending) whose throughput fell below a lower load's interval and then rose
/// above its own interval again at a higher load — a sweep that is not monotone beyond its
/// noise (the machine, or the target, changed during it). Returns `(dip, recovered at)`.
pub fn dips(levels: &[Measured]) -> Vec<(f64, f64)> {
    let mut sorted = levels.to_vec();
    sorted.sort_by(|a, b| a.load.total_cmp(&b.load));
    let mut out = Vec::new();
    for (j, m) in sorted.iter().enumerate() {
        let fell = sorted[..j].iter().any(|a| m.hi < a.lo);
        let recovered = sorted[j + 1..].iter().find(|c| c.lo > m.hi);
        if let (true, Some(c)) = (fell, recovered) {
            out.push((m.load, c.load));
        }
    }
    out
}

/// A sweep's capacity verdict: computed once, when a run writes its results, and stored with
/// them, so every reader (report, compare, conclusion) shows the same figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    /// [`usable_capacity`].
    pub usable: Option<f64>,
    /// [`limit_capacity`].
    pub limit: Option<f64>,
    /// [`queue_knee`] with [`Verdict::knee_min_rise_s`].
    pub knee: Option<f64>,
    /// [`last_without_queueing`].
    pub no_queue_until: Option<f64>,
    /// Where the levels' queue times came from: the server's /metrics if any level's did,
    /// else the engine's stamps; `None` when no level had one.
    pub queue_source: Option<QueueSource>,
    /// The knee's threshold, seconds ([`KNEE_MIN_RISE`]).
    pub knee_min_rise_s: f64,
    /// [`retry_storm`]: the retry shares from the last level without retries.
    pub retry_storm: Option<Vec<RetryShare>>,
    /// [`reach`]: whether the limit was found (absent in results written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<Reach>,
    /// The first load whose SLOs did not hold with confidence (the bracket's upper end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_unsure: Option<f64>,
    /// [`holds_above_a_break`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds_above_break: Vec<f64>,
}

impl Verdict {
    /// The verdict of `levels`, whose queue times came from `sources` (one per level that had
    /// one), with each level's retry share.
    pub fn of(levels: &[LevelOutcome], sources: &[QueueSource], retry_shares: &[RetryShare]) -> Verdict {
        let queue_source = if sources.contains(&QueueSource::ServerMetrics) {
            Some(QueueSource::ServerMetrics)
        } else {
            sources.first().copied()
        };
        let (reach, first_unsure) = reach(levels).map_or((None, None), |(r, u)| (Some(r), u));
        Verdict {
            reach,
            first_unsure,
            holds_above_break: holds_above_a_break(levels),
            usable: usable_capacity(levels),
            limit: limit_capacity(levels),
            knee: queue_knee(levels, KNEE_MIN_RISE),
            no_queue_until: last_without_queueing(levels, KNEE_MIN_RISE),
            queue_source,
            knee_min_rise_s: KNEE_MIN_RISE,
            retry_storm: retry_storm(retry_shares),
        }
    }
}

/// A level's retry share: retries / attempts at that load.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RetryShare {
    pub load: f64,
    /// Retries / (requests + retries): the share of attempts that were retries.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub share: f64,
}

/// Retry share of a level, at or above which retries matter.
pub const RETRY_STORM_MIN_SHARE: f64 = 0.05;

/// A retry storm: retries feeding on themselves. With `(load, retry_share)` per level, where
/// `retry_share` = retries / attempts, it is one when the highest load's share is at least
/// [`RETRY_STORM_MIN_SHARE`], and the share never falls and rises overall from the first level
/// with retries up (loads ascending): the extra attempts are load the target would not have
/// had, and they grow with the load. Returns the shares from the last level without retries.
pub fn retry_storm(levels: &[RetryShare]) -> Option<Vec<RetryShare>> {
    let mut sorted = levels.to_vec();
    sorted.sort_by(|a, b| a.load.total_cmp(&b.load));
    let first = sorted.iter().position(|l| l.share > 0.0)?;
    let tail = &sorted[first..];
    let last = tail.last()?.share;
    let rising =
        tail.windows(2).all(|w| w[1].share >= w[0].share) && (tail.len() == 1 && first > 0 || last > tail[0].share);
    (last >= RETRY_STORM_MIN_SHARE && rising).then(|| sorted[first.saturating_sub(1)..].to_vec())
}

#[cfg(test)]
mod tests {
    #[test]
    fn queue_time_prefers_the_engine_s_stamps_then_the_server_s_mean() {
        use super::{level_queue_time, QueueSource::*};
        assert_eq!(level_queue_time(Some(0.002), Some(0.004)), Some((0.002, EngineStamps)));
        assert_eq!(level_queue_time(None, Some(0.004)), Some((0.004, ServerMetrics)));
        assert_eq!(level_queue_time(None, None), None);
    }

    #[test]
    fn a_retry_share_rising_with_load_is_a_storm() {
        use super::{retry_storm, RetryShare};
        let at = |l: &[(f64, f64)]| l.iter().map(|&(load, share)| RetryShare { load, share }).collect::<Vec<_>>();
        let storm = |l: &[(f64, f64)]| retry_storm(&at(l));
        // 0 → 1 % → 6 % → 20 %: a storm, reported from the last level without retries.
        let s = storm(&[(8.0, 0.06), (1.0, 0.0), (2.0, 0.0), (4.0, 0.01), (16.0, 0.2)]).unwrap();
        assert_eq!(s, at(&[(2.0, 0.0), (4.0, 0.01), (8.0, 0.06), (16.0, 0.2)]));
        // Only the top level retries, at 10 %: rising from zero.
        assert!(storm(&[(1.0, 0.0), (2.0, 0.1)]).is_some());
        // Flat, falling, or small shares are not.
        assert!(storm(&[(1.0, 0.1), (2.0, 0.1)]).is_none());
        assert!(storm(&[(1.0, 0.2), (2.0, 0.1)]).is_none());
        assert!(storm(&[(1.0, 0.0), (2.0, 0.01), (4.0, 0.04)]).is_none());
        assert!(storm(&[(1.0, 0.0), (2.0, 0.0)]).is_none());
        assert!(storm(&[]).is_none());
    }

    use super::*;

    fn lv(load: f64, ok: bool, tps: f64, q: f64) -> LevelOutcome {
        LevelOutcome {
            load,
            slos_hold: ok,
            surely_holds: ok,
            slo_used: 0.0,
            output_throughput: tps,
            queue_time: Some(q),
        }
    }

    #[test]
    fn a_throughput_that_falls_and_recovers_beyond_its_intervals_is_a_dip() {
        let m = |load, value: f64, half: f64| Measured { load, value, lo: value - half, hi: value + half };
        // The sweep: 905 → 322 → 529 → 468 → 642 tok/s from 16 to 64 users.
        let sweep = [
            m(16.0, 905.0, 60.0),
            m(24.0, 322.0, 60.0),
            m(32.0, 529.0, 60.0),
            m(48.0, 468.0, 60.0),
            m(64.0, 642.0, 60.0),
        ];
        assert_eq!(dips(&sweep), vec![(24.0, 32.0), (48.0, 64.0)]);
        // Within the noise: none.
        let flat = [m(1.0, 100.0, 30.0), m(2.0, 80.0, 30.0), m(4.0, 110.0, 30.0)];
        assert!(dips(&flat).is_empty());
    }

    #[test]
    fn refinement_aims_where_the_slo_reaches_its_bound() {
        // 64 users used 48 % of the TPOT bound, 128 used 103.6 %: 97 % falls at
        // 64 + (0.97 − 0.48) / 0.556 × 64 = 120.4; kept 8 users (an eighth) from 128: 120.
        assert_eq!(refine_point((64.0, 0.48), (128.0, 1.036)), 120.0);
        assert!((refine_point((64.0, 0.48), (128.0, 2.0)) - 84.63).abs() < 0.01);
        // Near the pass end: an eighth of the bracket above it.
        assert_eq!(refine_point((64.0, 0.99), (128.0, 3.0)), 72.0);
        // Not rising (noise): the midpoint.
        assert_eq!(refine_point((64.0, 0.9), (128.0, 0.8)), 96.0);
    }

    #[test]
    fn usable_capacity_asks_for_confidence_and_reach_says_what_it_means() {
        // 8 users hold by their values, but not with confidence: capacity is 4, found.
        let mut levels = vec![lv(1.0, true, 1.0, 0.0), lv(4.0, true, 2.0, 0.0), lv(8.0, true, 3.0, 0.0)];
        levels[2].surely_holds = false;
        assert_eq!(usable_capacity(&levels), Some(4.0));
        assert_eq!(reach(&levels), Some((Reach::Found, Some(8.0))));
        assert_eq!(pass_fail(&levels), Some((4.0, 8.0)));
        levels[2].surely_holds = true;
        assert_eq!(reach(&levels), Some((Reach::NotReached, None)));
        levels[0].surely_holds = false;
        assert_eq!(reach(&levels), Some((Reach::BelowLowest, Some(1.0))));
        assert_eq!(holds_above_a_break(&levels), vec![4.0, 8.0]);
        assert_eq!(reach(&[]), None);
    }

    #[test]
    fn hand_computed_sweep() {
        // Throughput rises to 16 and flattens; SLOs fail from 16 on; queueing rises at 8.
        let levels = vec![
            lv(1.0, true, 50.0, 0.001),
            lv(2.0, true, 95.0, 0.001),
            lv(4.0, true, 170.0, 0.002),
            lv(8.0, true, 250.0, 0.030),
            lv(16.0, false, 300.0, 0.400),
            lv(32.0, false, 290.0, 1.500),
        ];
        assert_eq!(usable_capacity(&levels), Some(8.0));
        assert_eq!(limit_capacity(&levels), Some(16.0));
        assert_eq!(queue_knee(&levels, 0.010), Some(8.0));
        assert_eq!(last_without_queueing(&levels, 0.010), Some(4.0));
        // Usable capacity never exceeds limit capacity here, as the seeds expect.
        assert!(usable_capacity(&levels) <= limit_capacity(&levels));
        assert_eq!(pass_fail(&levels), Some((8.0, 16.0)));
        let none = [RetryShare { load: 1.0, share: 0.0 }, RetryShare { load: 2.0, share: 0.0 }];
        let v = Verdict::of(&levels, &[QueueSource::EngineStamps; 6], &none);
        assert_eq!((v.usable, v.limit, v.knee, v.no_queue_until), (Some(8.0), Some(16.0), Some(8.0), Some(4.0)));
        assert_eq!((v.queue_source, v.retry_storm), (Some(QueueSource::EngineStamps), None));
        let v = Verdict::of(&levels, &[QueueSource::EngineStamps, QueueSource::ServerMetrics], &[]);
        assert_eq!(v.queue_source, Some(QueueSource::ServerMetrics));
    }

    #[test]
    fn conservative_and_empty_cases() {
        let noisy = vec![lv(1.0, true, 1.0, 0.0), lv(2.0, false, 2.0, 0.0), lv(4.0, true, 3.0, 0.0)];
        assert_eq!(usable_capacity(&noisy), Some(1.0), "a pass above a failure is not capacity");
        let none = vec![lv(1.0, false, 1.0, 0.0)];
        assert_eq!(usable_capacity(&none), None);
        assert_eq!(pass_fail(&none), None, "nothing passed: nothing to bisect");
        assert_eq!(pass_fail(&noisy), Some((1.0, 2.0)));
        assert_eq!(pass_fail(&[lv(1.0, true, 1.0, 0.0)]), None);
        assert_eq!(usable_capacity(&[]), None);
        assert_eq!(limit_capacity(&[]), None);
        assert_eq!(limit_capacity(&[lv(1.0, false, 0.0, 0.0), lv(2.0, false, 0.0, 0.0)]), None, "nothing completed");
        let flat = vec![lv(1.0, true, 1.0, 0.001), lv(2.0, true, 2.0, 0.0015)];
        assert_eq!(queue_knee(&flat, 0.010), None);
        assert_eq!(last_without_queueing(&flat, 0.010), Some(2.0));
    }

    /// The two sweeps: `run` held up to 16 users, `capacity` broke at 10 — they
    /// contradict; a side that broke only above the other's capacity does not.
    #[test]
    fn sweeps_that_cannot_both_be_right_are_caught() {
        let l = |load: f64, holds: bool| LevelOutcome {
            load,
            slos_hold: holds,
            surely_holds: holds,
            slo_used: 0.5,
            output_throughput: 100.0,
            queue_time: None,
        };
        let run = [l(1.0, true), l(4.0, true), l(16.0, true), l(64.0, false)];
        let capacity = [l(1.0, true), l(2.0, true), l(4.0, true), l(8.0, true), l(10.0, false), l(16.0, false)];
        let c = contradiction(&run, &capacity).unwrap();
        assert_eq!(c, Contradiction { held_by: 0, usable: 16.0, broke_at: 10.0 });
        let c = contradiction(&capacity, &run).unwrap();
        assert_eq!((c.held_by, c.usable, c.broke_at), (1, 16.0, 10.0));
        let agreeing = [l(1.0, true), l(16.0, true), l(24.0, true), l(32.0, false)];
        assert_eq!(contradiction(&run, &agreeing), None, "the limit lies in 24–32 on one, 16–64 on the other");
    }

    /// Under a quarter: ×4; to 55 %: ×2; above: to 110 % of the bound, 1.1 ÷ used, within
    /// ×1.05–×2 (0.96 → 1.146; at or past the bound, 5 % more).
    #[test]
    fn a_search_steps_less_the_nearer_an_slo_is_to_its_bound() {
        assert_eq!((search_step(0.1), search_step(0.4), search_step(f64::NAN)), (4.0, 2.0, 2.0));
        assert!((search_step(0.96) - 1.1 / 0.96).abs() < 1e-12);
        assert_eq!((search_step(0.56), search_step(1.2)), (1.1 / 0.56, 1.05));
    }
}
