//! The written conclusion of seed 000 §10, built from the typed run summary and its stored
//! capacity verdict: scenario and lengths, the recommended level's P95 TTFT/TPOT and
//! throughput, where waiting starts, usable and limit capacity, and what breaks next; for
//! multi-turn, agent and RAG runs their own sentence. Written once here for the console,
//! `conclusion.txt` and the report.

use crate::text::ms;
use goodput_metrics::capacity::{QueueSource, Reach, Verdict};
use goodput_metrics::interval::{Confidence, Interval};
use goodput_metrics::level::SloResult;
use goodput_metrics::Summary;
use goodput_results::{LevelReport, LoadUnit, Results, RunSummary, SearchStop, FORMAT};

/// A run's conclusion: the summary it is written from.
pub struct Conclusion<'a> {
    s: &'a RunSummary,
    v: Verdict,
}

/// A time in whole milliseconds with its unit, `-` when unknown.
fn p50_ms(x: &Option<Summary>) -> f64 {
    ms(x, |d| d.p50).unwrap_or(f64::NAN)
}

/// The conclusion the report shows of `r`: built from its summary, or for results written
/// before the typed summary (format 1), which lack what it is built from, their own
/// `conclusion.txt`.
pub fn shown(r: &Results) -> String {
    if r.summary.format >= FORMAT {
        Conclusion::of(&r.summary).body()
    } else {
        r.conclusion.clone()
    }
}

impl<'a> Conclusion<'a> {
    pub fn of(s: &'a RunSummary) -> Self {
        Conclusion { s, v: s.verdict() }
    }

    fn at(&self, load: f64) -> Option<&'a LevelReport> {
        self.s.level(load)
    }

    /// The text under a `Conclusion` heading, as the console and `conclusion.txt` show it.
    pub fn render(&self) -> String {
        format!("Conclusion\n{}", self.body())
    }

    /// The conclusion itself, one paragraph.
    pub fn body(&self) -> String {
        // Describe the recommended level, or the lowest one when none meets the SLOs.
        let Some(shown) = self.v.usable.and_then(|u| self.at(u)).or_else(|| self.s.levels.first()) else {
            return "No level ran.".into();
        };
        let mut out = if self.s.complete {
            String::new()
        } else {
            "This run ended early (interrupted or killed); what follows covers the levels it finished. ".into()
        };
        out.push_str(&self.headline(shown));
        out.push_str(&Self::reasoning(shown));
        let parts = [
            self.queueing(),
            self.capacity(),
            self.soak(),
            self.consistency(),
            self.machine(),
            self.short_outputs(),
            self.failures(),
        ];
        for part in parts {
            out.push_str(&part);
        }
        out.push_str(&Self::turns(shown));
        out.push_str(&Self::agent(shown));
        out.push_str(&Self::rag(shown));
        out.push_str(&self.breaks());
        out
    }

    fn headline(&self, shown: &LevelReport) -> String {
        let (s, unit, w) = (&shown.summary, self.s.load_unit, &self.s.workload);
        let lengths = if w.lengths.is_empty() { String::new() } else { format!("{}; ", w.lengths) };
        if s.completed == 0 {
            return format!(
                "In the {} scenario ({lengths}measured mean input {:.0} tokens), at {} {unit}: none of {} measured requests completed.",
                w.name, s.mean_input_tokens, s.load, s.requests
            );
        }
        let iv = s.intervals.clone().unwrap_or_default();
        // One decimal below 100 (of the interval's top, else of the value), whole numbers
        // above: a value and its interval always printed alike ("1.5 ms [1.5–1.6 ms]", not
        // "1 ms [1.5–1.6 ms]").
        let places = |v: Option<f64>, i: Option<Interval>, scale: f64| {
            usize::from(i.and_then(|i| i.hi).map_or(v, |hi| Some(hi * scale)).is_some_and(|x| x < 100.0))
        };
        let within = |i: Option<Interval>, d: usize, scale: f64, unit: &str| {
            i.map_or(String::new(), |i| format!(" [{}{unit}]", i.text(scale, d)))
        };
        let point = |v: Option<f64>, d: usize| v.map_or("-".into(), |v| format!("{v:.d$} ms"));
        let (ttft, tpot) = (ms(&s.ttft, |x| x.p95), ms(&s.tpot, |x| x.p95));
        let (dt, dp) = (places(ttft, iv.ttft_p95, 1e3), places(tpot, iv.tpot_p95, 1e3));
        let d_out = places(Some(s.output_throughput), iv.output_throughput, 1.0);
        format!(
            "In the {} scenario ({lengths}measured mean input {:.0} tokens, output {:.0} tokens), at {} {unit}: \
             P95 TTFT {}{}, P95 TPOT {}{}, per-user generation {:.1} tok/s (median), total output {:.d_out$} tok/s{}, \
             {:.2} requests/s ({} measured requests; [95 % intervals]).",
            w.name,
            s.mean_input_tokens,
            s.mean_output_tokens,
            s.load,
            point(ttft, dt),
            within(iv.ttft_p95, dt, 1e3, " ms"),
            point(tpot, dp),
            within(iv.tpot_p95, dp, 1e3, " ms"),
            s.per_user_tps.as_ref().map_or(0.0, |x| x.p50),
            s.output_throughput,
            within(iv.output_throughput, d_out, 1.0, ""),
            s.request_throughput,
            s.requests,
        )
    }

    /// Reasoning models: how long users wait for the answer to start, and how much of that is
    /// thinking (medians, so the two parts are of the same requests' kind).
    fn reasoning(shown: &LevelReport) -> String {
        let s = &shown.summary;
        let Some(counted) = &s.reasoning_tokens else { return String::new() };
        let (ttfo, think) = match (&s.ttfo, &s.reasoning_time) {
            (Some(ttfo), Some(think)) => (ttfo, think),
            (Some(ttfo), None) => {
                return format!(
                    " Users wait {:.2} s (median; P95 {:.2} s) for the answer to start; the reasoning (median {:.0} tokens, counted by the server's usage) was not streamed, so its time is inside TTFT.",
                    ttfo.p50, ttfo.p95, counted.p50
                )
            }
            (None, _) => {
                return format!(
                    " No answer started: the requests spent their output on reasoning (median {:.0} reasoning tokens) and ended before an answer token came.",
                    counted.p50
                )
            }
        };
        let tokens = format!(", {:.0} tokens", counted.p50);
        let share = s
            .reasoning_share
            .map_or(String::new(), |x| format!("; reasoning is {:.0} % of the output tokens", x * 100.0));
        format!(
            " Users wait {:.2} s (median; P95 {:.2} s) for the answer to start, of which {:.2} s is thinking (median reasoning time{tokens}){share}.",
            ttfo.p50, ttfo.p95, think.p50
        )
    }

    /// Where waiting starts: the last level without and the knee, with their source.
    fn queueing(&self) -> String {
        let unit = self.s.load_unit;
        let from_metrics = self.v.queue_source == Some(QueueSource::ServerMetrics);
        let source = if from_metrics { " (queue times from the server's /metrics)" } else { "" };
        match (self.v.no_queue_until, self.v.knee) {
            (Some(q), Some(k)) => {
                let what = match self.at(k).and_then(LevelReport::queue_time) {
                    Some((v, QueueSource::ServerMetrics)) => format!("queue time rises (mean {:.0} ms)", v * 1e3),
                    Some((v, QueueSource::EngineStamps)) => {
                        format!("the wait before the engine computes rises (median {:.0} ms of handoff and queue)", v * 1e3)
                    }
                    None => "queue time rises".into(),
                };
                format!(" Up to {q} {unit} {}; from {k} {unit} {what} and pushes TTFT up{source}.", self.calm(q))
            }
            (Some(q), None) => format!(" Up to {q} {unit}, the highest level run, {}{source}.", self.calm(q)),
            _ => " Where queueing starts is unknown: the target returned no engine stamps and its /metrics no queue-time histogram.".into(),
        }
    }

    /// What waiting looks like at `load`, below the knee: "requests are hardly queued" only
    /// while the P95 wait is under [`MATERIAL_WAIT_SHARE`] of the P95 TTFT, with both figures;
    /// otherwise the wait is named as the material share it is.
    fn calm(&self, load: f64) -> String {
        let Some(s) = self.at(load).map(|l| &l.summary) else { return "requests are hardly queued".into() };
        let wait = s.engine_wait.as_ref().or(s.queue_time.as_ref()).map(|w| w.p95);
        let ttft = s.ttft.as_ref().map(|t| t.p95);
        match (wait, ttft) {
            (Some(w), Some(t)) if t > 0.0 && w / t < MATERIAL_WAIT_SHARE => format!(
                "requests are hardly queued (P95 wait {:.1} ms, {:.0} % of P95 TTFT)",
                w * 1e3,
                100.0 * w / t
            ),
            (Some(w), Some(t)) if t > 0.0 => format!(
                "the wait does not rise with load, yet it is {:.1} ms at P95, {:.0} % of P95 TTFT (the step in progress, or a queue)",
                w * 1e3,
                100.0 * w / t
            ),
            _ => "requests are hardly queued".into(),
        }
    }

    fn capacity(&self) -> String {
        let unit = self.s.load_unit;
        let slo_text = self.s.slos.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ");
        let top = self.s.levels.last().map_or(f64::NAN, |l| l.summary.load);
        let mut out = match (self.v.reach, self.v.usable, self.s.levels.first()) {
            (_, _, None) => return String::new(),
            (Some(Reach::NotReached), Some(u), _) => format!(
                " Every level held its SLOs ({slo_text}; {AS_JUDGED}): the usable capacity is at least {u} {unit} (the limit was not reached: {})",
                self.not_reached_why()
            ),
            (_, Some(u), _) => format!(
                " Under the SLOs ({slo_text}), the usable capacity is {u} {unit}: every SLO holds there and at every level below ({AS_JUDGED}){}",
                self.v.first_unsure.map_or(String::new(), |f| format!(", and no longer at {f} {unit}"))
            ),
            (_, None, Some(first)) => format!(
                " No level held the SLOs ({slo_text}; {AS_JUDGED}); the usable capacity is below {} {unit}, the lowest level run",
                first.summary.load
            ),
        };
        if top.is_nan() {
            out.push('.');
            return out;
        }
        match self.v.limit.and_then(|l| self.at(l)) {
            Some(peak) => out.push_str(&format!("; {}.", self.peak(peak))),
            None => out.push('.'),
        }
        out
    }

    /// Why a sweep that held everywhere stopped: the search's bound or budget, or the levels given.
    fn not_reached_why(&self) -> String {
        let unit = self.s.load_unit;
        match self.s.search.as_ref().and_then(|x| x.stopped.map(|why| (x, why))) {
            Some((x, SearchStop::MaxLoad)) => {
                let flag = if unit == LoadUnit::Rate { "--max-rate" } else { "--max-users" };
                format!("the search stopped at its bound, {flag} {}; raise it to go further", x.max_load)
            }
            Some((x, SearchStop::Budget)) => format!(
                "the search's time budget of {:.0} s left no room for a higher level; give a longer --search-budget",
                x.budget_s
            ),
            Some((_, SearchStop::Interrupted)) => "the run was interrupted before the search went further".into(),
            _ => "no higher level was given; add higher levels, or --search to look for the limit".into(),
        }
    }

    /// The peak of output throughput with its interval, and whether other levels are within it.
    fn peak(&self, peak: &LevelReport) -> String {
        let (unit, s) = (self.s.load_unit, &peak.summary);
        let interval = s.intervals.as_ref().and_then(|i| i.output_throughput);
        let mut out = format!("output throughput peaks at {} {unit} ({:.0} tok/s", s.load, s.output_throughput);
        let Some(i) = interval.filter(|i| i.lo.is_some()) else {
            out.push_str(", limit capacity)");
            return out;
        };
        out.push_str(&format!(", 95 % interval {} tok/s, limit capacity)", i.text(1.0, 0)));
        let lo = i.lo.unwrap_or(f64::INFINITY);
        let close: Vec<String> = self
            .s
            .levels
            .iter()
            .filter(|l| l.summary.load != s.load && l.summary.output_throughput >= lo)
            .map(|l| l.summary.load.to_string())
            .collect();
        if !close.is_empty() {
            out.push_str(&format!(
                ", but {} {unit} came within that interval: the peak's place is not significant (throughput is flat there)",
                close.join(", ")
            ));
        }
        out
    }

    /// The most frequent reasons requests failed, over every level.
    fn failures(&self) -> String {
        let all = self.s.levels.iter().flat_map(|l| &l.summary.failures).map(|f| (f.kind, f.count, &f.example));
        let top = goodput_metrics::stats::tally(all);
        if top.is_empty() {
            return String::new();
        }
        let total: usize = top.iter().map(|t| t.1).sum();
        let requests: usize = self.s.levels.iter().map(|l| l.summary.requests).sum();
        let named: Vec<String> =
            top.iter().take(3).map(|(k, n, example)| format!("{n} {k} (e.g. \"{}\")", clip(example))).collect();
        format!(" {total} of {requests} measured requests failed: {}.", named.join(", "))
    }

    /// `--soak`: whether the usable capacity held over time.
    fn soak(&self) -> String {
        self.s.soak.as_ref().map_or(String::new(), |s| {
            format!(" Held over time? The soak ran {}.", crate::console::soak_verdict(s, self.s.load_unit))
        })
    }

    /// A sweep that is not monotone: levels that held above one that did not, and output
    /// throughput that fell and recovered beyond its intervals.
    fn consistency(&self) -> String {
        let unit = self.s.load_unit;
        let mut out = String::new();
        if let (false, Some(f)) = (self.v.holds_above_break.is_empty(), self.v.first_unsure) {
            let loads: Vec<String> = self.v.holds_above_break.iter().map(f64::to_string).collect();
            out.push_str(&format!(
                " Not monotone: the SLOs held at {} {unit}, above {f} {unit} where they did not (noise, or a machine or target that changed); usable capacity counts only up to the first level that did not hold.",
                loads.join(", ")
            ));
        }
        let measured: Vec<goodput_metrics::capacity::Measured> = self
            .s
            .levels
            .iter()
            .filter_map(|l| {
                let i = l.summary.intervals.as_ref()?.output_throughput?;
                let (load, value) = (l.summary.load, l.summary.output_throughput);
                Some(goodput_metrics::capacity::Measured { load, value, lo: i.lo?, hi: i.hi? })
            })
            .collect();
        let over: Vec<String> = self
            .s
            .levels
            .iter()
            .filter_map(|l| {
                if let Some(x) = &l.saturated {
                    let why =
                        format!("stopped after {:.1} s, E2E {:.2} → {:.2} s", x.at_s, x.early_e2e_s, x.late_e2e_s);
                    return Some(format!("{} {unit} ({why})", l.summary.load));
                }
                let (a, b) = l.steady.as_ref()?.oversaturated?;
                Some(format!("{} {unit} (in flight {a:.1} → {b:.1})", l.summary.load))
            })
            .collect();
        if !over.is_empty() {
            out.push_str(&format!(
                " Over-saturated: the queue grew without bound at {} — requests arrived faster than they were served, so those levels' latencies grow with their length, not their load, and they count as broken.",
                over.join(", ")
            ));
        }
        let dips = goodput_metrics::capacity::dips(&measured);
        if !dips.is_empty() {
            let named: Vec<String> =
                dips.iter().map(|(d, r)| format!("at {d} {unit}, recovering at {r} {unit}")).collect();
            out.push_str(&format!(
                " Output throughput fell beyond its 95 % intervals {} — more load cannot lower what a steady target serves, so the machine or the target changed during the sweep; rerun it (--repeats) before trusting the levels there.",
                named.join("; ")
            ));
        }
        out
    }

    /// Levels measured on a busy or drifting machine: the result is not reproducible as is.
    fn machine(&self) -> String {
        let busy: Vec<(f64, Vec<goodput_metrics::machine::Busy>)> = self
            .s
            .levels
            .iter()
            .filter_map(|l| Some((l.summary.load, l.machine.as_ref()?.busy())))
            .filter(|(_, b)| !b.is_empty())
            .collect();
        let Some((load, why)) = busy.first() else { return String::new() };
        let loads: Vec<String> = busy.iter().map(|(l, _)| l.to_string()).collect();
        format!(
            " Caution: the machine was busy during {} of {} levels ({} {}; at {load}: {}), so these results are not reproducible as measured: rerun with --repeats to measure the spread, pin the engine (--engine-cpus), or use a quiet machine.",
            busy.len(),
            self.s.levels.len(),
            loads.join(", "),
            self.s.load_unit,
            why.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
        )
    }

    fn short_outputs(&self) -> String {
        let short: usize = self.s.levels.iter().map(|l| l.summary.short_outputs).sum();
        if short == 0 {
            return String::new();
        }
        let completed: usize = self.s.levels.iter().map(|l| l.summary.completed).sum();
        format!(
            " Caution: {short} of {completed} completed requests came back shorter than the scenario requires, so these are not the scenario's lengths."
        )
    }

    fn turns(shown: &LevelReport) -> String {
        let Some((a, b)) = shown.turns.first().zip(shown.turns.last()).filter(|(a, b)| a.turn != b.turn) else {
            return String::new();
        };
        let p95 = |t: &goodput_metrics::turns::TurnSummary| t.ttft.as_ref().map_or(f64::NAN, |x| x.p95 * 1e3);
        format!(
            " Over a session, prompts grow from {:.0} tokens at turn {} to {:.0} at turn {}; the prefix cache serves {:.0} % of the last turn's prompt, and P95 TTFT goes from {:.0} ms to {:.0} ms.",
            a.prompt_tokens,
            a.turn,
            b.prompt_tokens,
            b.turn,
            100.0 * b.cached_tokens / b.prompt_tokens.max(1.0),
            p95(a),
            p95(b)
        )
    }

    fn agent(shown: &LevelReport) -> String {
        let Some(ag) = &shown.agent else { return String::new() };
        format!(
            " In the agent scenario each task triggers {:.1} model calls and {:.1} tool/knowledge-base calls; task E2E P95 {:.2} s (median {:.2} s), {:.0} % of it waiting on tools and retrievals.",
            ag.amplification,
            ag.tool_calls_per_task,
            ag.task_e2e.as_ref().map_or(f64::NAN, |x| x.p95),
            ag.task_e2e.as_ref().map_or(f64::NAN, |x| x.p50),
            ag.tool_wait_share * 100.0
        )
    }

    fn rag(shown: &LevelReport) -> String {
        let Some(r) = &shown.rag else { return String::new() };
        let s = &shown.summary;
        use goodput_core::StepKind;
        let stage = |k: StepKind| r.steps.iter().find(|x| x.kind == k).map_or(f64::NAN, |x| p50_ms(&x.duration));
        format!(
            " A RAG query's median timeline: embed {:.1} ms, retrieve {:.1} ms, rerank {:.1} ms, assemble {:.1} ms, queue {:.1} ms, prefill {:.0} ms, decode {:.0} ms; query E2E P95 {:.2} s.",
            stage(StepKind::Embed),
            stage(StepKind::Retrieve),
            stage(StepKind::Rerank),
            stage(StepKind::Assemble),
            p50_ms(&s.queue_time),
            p50_ms(&s.prefill_time),
            p50_ms(&s.decode_time),
            r.task_e2e.as_ref().map_or(f64::NAN, |d| d.p95)
        )
    }

    /// Where the SLOs stopped holding with confidence: the first such level's SLOs that did
    /// not, with their values, intervals and what those say.
    fn breaks(&self) -> String {
        let Some(first) = self.v.first_unsure.and_then(|f| self.at(f)) else { return String::new() };
        let s = &first.summary;
        let shown: Vec<String> = s.slos.iter().filter(|r| !r.confidence().surely_holds()).map(broken_slo).collect();
        let what = match s.confidence() {
            Confidence::Breaks => "the SLOs break",
            Confidence::BreaksNotSignificant => "the SLOs break, though not significantly",
            Confidence::HoldsNotSignificant => "the SLOs are not shown to hold",
            _ => "the SLOs have no data",
        };
        format!(" At {} {} {what}: {}.", s.load, self.s.load_unit, shown.join("; "))
    }
}

/// How an SLO is judged to hold ([`goodput_metrics::interval`]), said beside every verdict.
pub const AS_JUDGED: &str = "percentiles and means with 95 % confidence, maxima and rates as counted";

/// The share of P95 TTFT a P95 wait must stay under for requests to be called hardly queued.
pub const MATERIAL_WAIT_SHARE: f64 = 0.25;

/// At most 120 characters of `s`, on a character boundary.
fn clip(s: &str) -> String {
    match s.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// `tpot_p95 <= 50ms (measured 51 ms, 95 % interval 50–52 ms: breaks)`.
fn broken_slo(r: &SloResult) -> String {
    let (scale, unit, d) = if r.slo.metric.is_rate() {
        (100.0, "%", 1)
    } else if r.slo.metric.is_time() {
        (1e3, " ms", if r.value.is_some_and(|v| v < 0.1) { 1 } else { 0 })
    } else {
        (1.0, "", 1)
    };
    let v = r.value.map_or("no data".into(), |v| format!("{:.d$}{unit}", v * scale));
    let within = r.interval.map_or(String::new(), |i| format!(", 95 % interval {}{unit}", i.text(scale, d)));
    format!("{} (measured {v}{within}: {})", r.slo, r.confidence().word())
}
