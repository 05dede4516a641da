//! The live view of a level on the progress line: requests done of the level's target (or
//! time of its duration), req/s, rolling TTFT and TPOT P50/P95, errors and an ETA, fed by the
//! workload's progress sink as each request ends and drawn by a view's own ticker (so the
//! load generator's tasks only push numbers; percentiles are taken when drawn, [`Live::line`]).
//! Fed only where the view draws it (the progress view's `draws_live`).

use goodput_core::{ClientRecord, Phase};
use goodput_workload::RecordSink;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The rolling window: the last this many requests that ended.
pub const WINDOW: usize = 200;

/// The last `cap` requests to end: when each ended (seconds from the level's start) and its
/// TTFT and TPOT (seconds; none for a failed request, or TPOT of one token). Percentiles are
/// over these alone (linear interpolation, as every goodput percentile), so a level's early
/// or cold requests leave the view as it goes on.
#[derive(Clone, Debug)]
pub struct Rolling {
    cap: usize,
    last: VecDeque<(f64, Option<f64>, Option<f64>)>,
}

impl Rolling {
    pub fn new(cap: usize) -> Self {
        Rolling { cap: cap.max(1), last: VecDeque::with_capacity(cap.max(1)) }
    }

    /// A request ended `at` seconds into the level.
    pub fn push(&mut self, at: f64, ttft: Option<f64>, tpot: Option<f64>) {
        if self.last.len() == self.cap {
            self.last.pop_front();
        }
        self.last.push_back((at, ttft, tpot));
    }

    /// The `p`th percentile of the window's TTFTs (`tpot`: TPOTs).
    pub fn percentile(&self, tpot: bool, p: f64) -> Option<f64> {
        let v: Vec<f64> = self.last.iter().filter_map(|x| if tpot { x.2 } else { x.1 }).collect();
        goodput_metrics::stats::percentile(&v, p)
    }

    /// Requests ended per second at `now` (seconds into the level): over the window, from the
    /// first of its requests to end when it is full, else from the level's start.
    pub fn rate(&self, now: f64) -> Option<f64> {
        let from = if self.last.len() == self.cap { self.last.front()?.0 } else { 0.0 };
        (now > from && !self.last.is_empty()).then(|| self.last.len() as f64 / (now - from))
    }
}

/// What a level is to do: measure a count of requests, or send for a time.
#[derive(Clone, Copy, Debug)]
pub enum Goal {
    Requests { measured: usize, cooldown: usize },
    Duration(Duration),
}

/// One level's view, shared by the progress sink (writing) and the bar's ticker (reading).
#[derive(Clone)]
pub struct Live(Arc<Mutex<State>>);

struct State {
    goal: Goal,
    start: Instant,
    rolling: Rolling,
    /// Requests ended, by phase as known when they ended.
    done: [usize; 3],
    errors: usize,
}

impl Live {
    pub fn new(goal: Goal) -> Self {
        let state = State { goal, start: Instant::now(), rolling: Rolling::new(WINDOW), done: [0; 3], errors: 0 };
        Live(Arc::new(Mutex::new(state)))
    }

    /// The workload's progress sink feeding this view.
    pub fn sink(&self) -> RecordSink {
        let live = self.clone();
        RecordSink::new(move |r, phase| live.ended(r, phase))
    }

    fn ended(&self, r: &ClientRecord, phase: Phase) {
        let (ttft, tpot) = if r.is_ok() {
            (goodput_metrics::request::ttft(r), goodput_metrics::request::tpot(r))
        } else {
            (None, None)
        };
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let at = s.start.elapsed().as_secs_f64();
        s.rolling.push(at, ttft, tpot);
        let i = match phase {
            Phase::Warmup => 0,
            Phase::Measured => 1,
            Phase::Cooldown => 2,
        };
        s.done[i] += 1;
        s.errors += usize::from(!r.is_ok());
    }

    /// The view as one line.
    pub fn line(&self) -> String {
        let s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        render(&s.rolling, s.goal, s.done, s.errors, s.start.elapsed().as_secs_f64())
    }
}

/// The view's line at `now` seconds into the level: `done` ended requests by phase (warm-up,
/// measured, cool-down).
fn render(rolling: &Rolling, goal: Goal, done: [usize; 3], errors: usize, now: f64) -> String {
    let [warm, measured, cool] = done;
    let rate = rolling.rate(now);
    // TTFT in whole milliseconds, TPOT (a few ms a token) with one decimal.
    let ms = |tpot: bool, p: f64| {
        let d = usize::from(tpot);
        rolling.percentile(tpot, p).map_or("-".into(), |x| format!("{:.d$}", x * 1e3))
    };
    let (progress, eta) = match goal {
        Goal::Requests { measured: target, cooldown } => {
            let left = (target + cooldown).saturating_sub(measured + cool);
            (format!("{measured}/{target} measured"), rate.map(|r| left as f64 / r))
        }
        Goal::Duration(d) => {
            let d = d.as_secs_f64();
            (format!("{now:.0}/{d:.0} s"), Some((d - now).max(0.0)))
        }
    };
    let warm = if warm > 0 { format!(" (+{warm} warm-up)") } else { String::new() };
    let rate = rate.map_or("-".into(), |r| format!("{r:.1}"));
    let eta = eta.filter(|e| e.is_finite()).map_or("-".into(), |e| format!("{e:.0} s"));
    format!(
        "{progress}{warm} │ {rate} req/s │ TTFT p50/p95 {}/{} ms │ TPOT p50/p95 {}/{} ms (last {WINDOW}) │ {errors} errors │ ETA {eta}",
        ms(false, 50.0),
        ms(false, 95.0),
        ms(true, 50.0),
        ms(true, 95.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_keeps_the_last_requests_and_their_percentiles() {
        let mut r = Rolling::new(4);
        assert_eq!((r.percentile(false, 50.0), r.rate(1.0)), (None, None));
        // TTFTs 1..=6 s ending at 1..=6 s; the last 4 stay: 3, 4, 5, 6 (one failed: none).
        for i in 1..=6 {
            let ttft = (i != 5).then_some(i as f64);
            r.push(i as f64, ttft, Some(0.01 * i as f64));
        }
        // TTFTs 3, 4, 6: P50 4, P95 = 4 + 0.9 · (6 − 4) = 5.8 (interpolated between ranks).
        assert_eq!(r.percentile(false, 50.0), Some(4.0));
        assert!((r.percentile(false, 95.0).unwrap() - 5.8).abs() < 1e-12);
        // TPOTs 0.03, 0.04, 0.05, 0.06: P50 0.045.
        assert!((r.percentile(true, 50.0).unwrap() - 0.045).abs() < 1e-12);
        // Full: 4 requests since the first of them ended (3 s) until 7 s: 1 req/s.
        assert_eq!(r.rate(7.0), Some(1.0));
        // Not full: since the level's start.
        let mut r = Rolling::new(10);
        r.push(1.0, Some(0.1), None);
        r.push(2.0, Some(0.2), None);
        assert_eq!(r.rate(4.0), Some(0.5));
        assert_eq!(r.percentile(true, 50.0), None, "no TPOT");
    }

    #[test]
    fn the_line_shows_progress_rate_latencies_errors_and_eta() {
        let mut r = Rolling::new(WINDOW);
        for i in 1..=10 {
            r.push(i as f64, Some(0.2), Some(0.05));
        }
        // 10 ended in 10 s: 1 req/s; 6 of 20 measured, 2 cool-down to come: 16 left, 16 s.
        let goal = Goal::Requests { measured: 20, cooldown: 2 };
        let line = render(&r, goal, [4, 6, 0], 1, 10.0);
        assert_eq!(
            line,
            "6/20 measured (+4 warm-up) │ 1.0 req/s │ TTFT p50/p95 200/200 ms │ TPOT p50/p95 50.0/50.0 ms (last 200) │ 1 errors │ ETA 16 s"
        );
        let line = render(&r, Goal::Duration(Duration::from_secs(30)), [0, 10, 0], 0, 12.0);
        assert!(line.starts_with("12/30 s │ 0.8 req/s") && line.ends_with("ETA 18 s"), "{line}");
        let empty = render(&Rolling::new(WINDOW), goal, [0; 3], 0, 0.5);
        assert!(
            empty.contains("- req/s") && empty.contains("TTFT p50/p95 -/- ms") && empty.ends_with("ETA -"),
            "{empty}"
        );
    }
}
