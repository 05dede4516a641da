//! The sweep of a run: levels one after another, each written as soon as it finishes
//! (records as each request ends, the rest and the summary after the level, so a later
//! failure keeps the earlier levels), refinement and search levels added, and at the end the
//! conclusion and the report written; the caller shows the tables ([`Outcome`]).

use super::clock;
use super::error::RunError;
use super::exporter::{Exporter, Serving};
use super::level::{self, Feeds, Finished};
use super::live::{Goal, Live};
use super::records::RecordWriter;
use super::rig::{machine, Rig};
use super::spec::{LevelSpec, RunSpec, Span};
use crate::progress::Progress;
use goodput_report::console as table;
use goodput_report::{export, Conclusion};
use goodput_results::{RetrySetting, RunSummary, RunWriter, WorkloadInfo, FORMAT};
use goodput_workload::{Arrival, RecordSink, Stop};
use std::collections::VecDeque;
use std::time::Duration;

type Result<T, E = RunError> = std::result::Result<T, E>;

pub struct Sweep<'a> {
    spec: &'a RunSpec,
    summary: RunSummary,
    files: Option<(RunWriter, RecordWriter)>,
    queue: VecDeque<LevelSpec>,
    refine_left: usize,
    first_id: u64,
    progress: &'a dyn Progress,
    /// The levels the sweep holds so far, and how many have finished.
    total: usize,
    done: usize,
    /// Raised by an interrupt: the current level stops sending, no later level starts.
    stop: Stop,
    /// The first request id of the level run last (its simulated twin takes the same).
    level_first_id: u64,
    /// `--predict`: wall seconds, simulated seconds and steps of the twins so far.
    twin_cost: (f64, f64, usize),
    /// `--simulate`: the harness's own cost is the simulation's, not a load generator's.
    simulated: bool,
    /// `--simulate`: steps and simulated seconds so far, and when the sweep started.
    sim_cost: (usize, f64, std::time::Instant),
    /// `--metrics-port`: the run's live metrics and their server (stopped with the sweep).
    exporter: Option<(Exporter, Serving)>,
    /// When the sweep started, the last level run and how long it took (a search's estimate
    /// of the next one).
    started: std::time::Instant,
    last: Option<(LevelSpec, Duration)>,
    /// Every level run, for `--soak` to run the usable one again.
    ran: Vec<LevelSpec>,
    /// Whether a level has said what a busy machine means (later ones say only that it was).
    busy_told: bool,
}

impl<'a> Sweep<'a> {
    pub fn start(spec: &'a RunSpec, rig: &Rig, stop: Stop, progress: &'a dyn Progress) -> Result<Self> {
        let w = &rig.workload;
        let mut summary = new_summary(spec, rig);
        summary.clock = Some(clock::clock_start(spec, rig, progress)?);
        // Bound before the run's files exist: a port in use leaves no half-made directory.
        let exporter = start_exporter(spec, &summary, progress)?;
        let files = create_files(spec)?;
        let slos: Vec<String> = spec.slos.iter().map(|s| s.to_string()).collect();
        let cap = spec.pacing.max_in_flight.map_or(String::new(), |n| format!("; at most {n} in flight"));
        let line = format!(
            "goodput run: {} on {} ({}), {}; {}{cap}; SLOs: {}",
            spec.model.name,
            rig.device,
            rig.weights,
            goodput_core::Target::describe(&*rig.target),
            w.describe(),
            slos.join(", ")
        );
        progress.line(&line, false);
        if let Some(note) = warmup_note(spec) {
            progress.line(&format!("note: {note}"), false);
        }
        if let Some(w) = spec.few_requests() {
            progress.line(&format!("warning: {w}"), true);
        }
        progress.levels(spec.levels.len());
        // `--rate-of-limit`: the rates found from the twin's limit before the first level.
        let queue = super::limit::levels(spec, progress)?;
        summary.prediction = spec.target.predict().map(|(_, p)| goodput_results::prediction::Prediction {
            profile: p.display().to_string(),
            levels: Vec::new(),
            capacity: RunSummary::verdict_of(&[]),
            steps_per_s: 0.0,
            speedup: 0.0,
        });
        Ok(Sweep {
            exporter,
            spec,
            summary,
            files,
            queue,
            refine_left: spec.refine_levels,
            first_id: 0,
            progress,
            total: spec.levels.len(),
            done: 0,
            stop,
            level_first_id: 0,
            twin_cost: (0.0, 0.0, 0),
            simulated: rig.simulated,
            sim_cost: (0, 0.0, std::time::Instant::now()),
            started: std::time::Instant::now(),
            last: None,
            ran: Vec::new(),
            busy_told: false,
        })
    }

    /// Level lines are progress (hidden by --quiet); warnings always show.
    fn log(&self, line: String, warning: bool) {
        self.progress.line(&line, warning);
    }

    /// One more level in the sweep.
    fn grow(&mut self) {
        self.total += 1;
        self.progress.levels(self.total);
    }

    /// The next level: the sweep's, then refinement levels while they help.
    /// `--start-at`: waits for the moment (or until stopped) before the first level, and
    /// keeps how late the sweep started.
    pub fn wait_for_start(&mut self, at: std::time::SystemTime) {
        let unix_s = at.duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        // With --clock-ref the moment is the reference's: this machine's clock reads
        // `at − offset` then, so shards on machines whose clocks disagree still start together.
        let here = clock::on_this_clock(at, self.summary.clock.as_ref().and_then(|c| c.offset_s()).unwrap_or(0.0));
        let now = std::time::SystemTime::now();
        if let Ok(wait) = here.duration_since(now) {
            self.log(format!("waiting {:.1} s for --start-at", wait.as_secs_f64()), true);
            while std::time::SystemTime::now() < here && !self.stop.raised() {
                let left = here.duration_since(std::time::SystemTime::now()).unwrap_or_default();
                std::thread::sleep(left.min(std::time::Duration::from_millis(100)));
            }
        }
        let late_s = std::time::SystemTime::now().duration_since(here).map_or(0.0, |d| d.as_secs_f64());
        if late_s > 1.0 {
            self.log(
                format!(
                    "warning: --start-at was {late_s:.1} s ago when the sweep could start: this process starts late"
                ),
                true,
            );
        }
        self.summary.start_at = Some(goodput_results::StartAt { unix_s, late_s });
    }

    pub fn next_level(&mut self) -> Option<LevelSpec> {
        if let Some(l) = self.queue.pop_front() {
            return Some(l);
        }
        if let Some(l) = self.extend() {
            self.grow();
            return Some(l);
        }
        if self.refine_left == 0 {
            return None;
        }
        self.refine_left -= 1;
        let outcomes: Vec<_> = self.summary.levels.iter().map(|l| l.outcome()).collect();
        let next = self.spec.refine.next(&outcomes)?;
        self.grow();
        Some(next)
    }

    /// A search's next level: twice the last one's load while every level so far held its
    /// SLOs with confidence, within `--max-users`/`--max-rate` and the time budget (the next
    /// level taken to last twice as long as the last). Keeps why the search stopped.
    fn extend(&mut self) -> Option<LevelSpec> {
        let search = self.spec.search?;
        if self.summary.search.as_ref()?.stopped.is_some() {
            return None;
        }
        let (last, took) = self.last.as_ref()?;
        let used = self.summary.level(last.load).map_or(0.0, |l| l.summary.most_used());
        let stop = if self.stop.raised() {
            Some(goodput_results::SearchStop::Interrupted)
        } else if !self.summary.levels.iter().all(|l| l.outcome().surely_holds) {
            Some(goodput_results::SearchStop::LimitFound)
        } else if self.started.elapsed() + *took * 2 > search.budget {
            Some(goodput_results::SearchStop::Budget)
        } else {
            None
        };
        let next = match stop {
            Some(_) => None,
            None => search.next(last, used),
        };
        if let (None, Some(record)) = (&next, self.summary.search.as_mut()) {
            record.stopped = Some(stop.unwrap_or(goodput_results::SearchStop::MaxLoad));
        }
        next
    }

    pub fn run_level(&mut self, rig: &Rig, level: &LevelSpec) -> Result<Finished> {
        let counts = self.spec.counts(level, rig.workload.is_sessions());
        // The live view, fed only where the view draws it.
        let label = format!("{} {}", level.load, self.spec.unit);
        let live = self.progress.draws_live().then(|| {
            Live::new(match level.duration {
                Some(d) => Goal::Duration(d),
                None => Goal::Requests { measured: counts.requests, cooldown: counts.cooldown },
            })
        });
        self.progress.level_started(&label, live.as_ref());
        let progress = live.map(|l| l.sink());
        // Every record goes to the files as it finishes, and is kept for a level cut short:
        // one shared copy for both.
        let seen = level::Seen::default();
        let (keep, file, load) = (seen.clone(), self.files.as_ref().map(|(_, w)| w.sender()), level.load);
        let exporter = self.exporter.as_ref().map(|(e, _)| e.clone());
        if let Some(e) = &exporter {
            // Levels are run one at a time, each stored as it finishes.
            e.level(self.summary.levels.len() + 1, level.load);
        }
        let sink = RecordSink::new(move |r, phase| {
            if let Some(e) = &exporter {
                e.ended(r, phase);
            }
            let r = std::sync::Arc::new(r.clone());
            if let Some(f) = &file {
                f.send(load, phase, r.clone());
            }
            keep.lock().unwrap_or_else(|e| e.into_inner()).push((phase, r));
        });
        let feeds = Feeds { sink: Some(sink), progress };
        let ramp = self.spec.pacing.ramp();
        let lp = level::level_plan(self.spec, level, &counts, self.first_id, ramp, feeds, self.stop.clone());
        self.level_first_id = self.first_id;
        self.first_id += level::id_span(level, &counts, &rig.workload);
        let t = std::time::Instant::now();
        let finished = level::run(rig, self.spec, level, lp, &self.stop, &seen);
        self.ran.push(level.clone());
        // The highest level so far is the one a search doubles.
        if self.last.as_ref().is_none_or(|(l, _)| l.load < level.load) {
            self.last = Some((level.clone(), t.elapsed()));
        }
        // A closed loop's warm-up may have taken ids beyond the plan's: the next level starts
        // past them, at a whole unit.
        let per_unit = rig.workload.requests_per_unit().max(1) as u64;
        self.first_id = self.first_id.max(finished.next_id.div_ceil(per_unit) * per_unit);
        Ok(finished)
    }

    /// `--soak`: the usable capacity found, run for the soak's duration without touching the
    /// sweep's files but the summary (its records stay in memory: one load, one level in the
    /// files), cut into windows and judged. Says why when there is nothing to soak.
    pub fn run_soak(&mut self, rig: &Rig) -> Result<()> {
        let Some((duration, windows)) = self.spec.soak else { return Ok(()) };
        let usable = self.summary.verdict().usable;
        let Some(level) = usable.and_then(|u| self.ran.iter().find(|l| l.load == u)).cloned() else {
            self.log("warning: --soak: no usable capacity was found, so there is nothing to soak".into(), true);
            return Ok(());
        };
        let level = LevelSpec { duration: Some(duration), ..level };
        self.log(format!("soak: {} {} for {:.0} s", level.load, self.spec.unit, duration.as_secs_f64()), false);
        let counts = self.spec.counts(&level, rig.workload.is_sessions());
        let ramp = self.spec.pacing.ramp();
        let lp =
            level::level_plan(self.spec, &level, &counts, self.first_id, ramp, Feeds::default(), self.stop.clone());
        let f = level::run(rig, self.spec, &level, lp, &self.stop, &level::Seen::default());
        let measured: Vec<&goodput_core::ClientRecord> = f.measured.iter().collect();
        let beside = goodput_metrics::soak::Beside { steps: &f.steps, process: &f.process };
        self.summary.soak = goodput_metrics::soak::soak(level.load, &measured, beside, &self.spec.slos, windows);
        if let Some((writer, _)) = self.files.as_mut() {
            let rows: Vec<goodput_results::RecordRow> = f
                .measured
                .into_iter()
                .map(|record| goodput_results::RecordRow {
                    level: level.load,
                    phase: goodput_core::Phase::Measured,
                    record,
                })
                .collect();
            goodput_results::files::write_jsonl(writer.dir(), goodput_results::files::SOAK_RECORDS, &rows)?;
            writer.write_summary(&self.summary)?;
        }
        Ok(())
    }

    /// The simulated twin of the level just run: the same plan (ids, seed, counts) on the
    /// simulated engine; kept in the summary's prediction.
    pub fn run_twin(&mut self, twin: &Rig, level: &LevelSpec) {
        let counts = self.spec.counts(level, twin.workload.is_sessions());
        let ramp = self.spec.pacing.ramp();
        let feeds = Feeds::default();
        let lp = level::level_plan(self.spec, level, &counts, self.level_first_id, ramp, feeds, self.stop.clone());
        let t = std::time::Instant::now();
        let f = level::run(twin, self.spec, level, lp, &self.stop, &level::Seen::default());
        let wall = t.elapsed().as_secs_f64();
        let simulated = f.report.summary.window_s;
        let (w, s, n) = &mut self.twin_cost;
        (*w, *s, *n) = (*w + wall, *s + simulated, *n + f.steps.len());
        let (w, s, n) = self.twin_cost;
        if let Some(p) = self.summary.prediction.as_mut() {
            p.push_level(f.report);
            p.steps_per_s = if w > 0.0 { n as f64 / w } else { 0.0 };
            p.speedup = if w > 0.0 { s / w } else { 0.0 };
        }
    }

    /// Warns, prints and writes a finished level; a capacity search stops at its first failure.
    pub fn finish_level(&mut self, f: Finished) -> Result<()> {
        let (r, unit) = (&f.report, self.spec.unit);
        for w in r.harness.warnings().into_iter().filter(|_| !self.simulated) {
            self.log(format!("warning: {} {unit}: {w}", r.summary.load), true);
        }
        for w in table::level_warnings(r, self.busy_told) {
            self.log(format!("warning: {} {unit}: {w}", r.summary.load), true);
        }
        self.busy_told |= r.machine.as_ref().is_some_and(|m| !m.busy().is_empty());
        for w in &f.warnings {
            self.log(w.clone(), true);
        }
        let explain = self.spec.explain;
        self.log(if explain { table::level_line(r, unit) } else { table::level_brief(r, unit) }, false);
        if let Some(ramp) = r.harness.ramp_s.filter(|_| explain) {
            let from = self.spec.pacing.ramp_source(self.spec.workload.is_sessions());
            self.log(format!("  users started over a {ramp:.2} s ramp ({from})"), false);
        }
        if !r.summary.failures.is_empty() {
            let (failed, n) = (r.summary.requests - r.summary.completed, r.summary.requests);
            let line = format!("  {failed} of {n} failed: {}", failure_text(&r.summary.failures));
            self.log(line, r.summary.completed == 0);
        }
        if r.partial {
            self.log(format!("  {} {unit}: partial (interrupted)", r.summary.load), true);
        }
        if explain {
            self.log(table::layers(r, unit), false);
        }
        self.done += 1;
        self.progress.level_finished();
        let failed = !r.summary.slos_hold();
        let load = r.summary.load;
        self.sim_cost.0 += f.steps.len();
        self.sim_cost.1 += r.summary.window_s;
        self.summary.push_level(f.report);
        if let Some((writer, records)) = self.files.as_mut() {
            records.sync()?;
            writer.append_level(load, &f.steps, &f.series)?;
            writer.write_summary(&self.summary)?;
        }
        self.export()?;
        if failed && self.spec.stop_at_first_failure {
            // A capacity search: nothing above a failing level needs running; refinement
            // still bisects below it.
            self.total = self.done;
            self.progress.levels(self.total);
            self.queue.clear();
        }
        Ok(())
    }

    /// `--export-json`, `--export-csv`, `--export-markdown`: rewritten after every level.
    fn export(&self) -> Result<()> {
        let (s, o) = (&self.summary, &self.spec.outputs);
        if let Some(p) = &o.export_json {
            export::json(p, s)?;
        }
        if let Some(p) = &o.export_csv {
            export::csv(p, s)?;
        }
        if let Some(p) = &o.export_markdown {
            export::markdown(p, s)?;
        }
        Ok(())
    }

    /// The summary marked complete unless `interrupted`, written with the conclusion (and the
    /// report page when asked); the [`Outcome`] for the caller to show.
    pub fn finish(mut self, interrupted: bool) -> Result<Outcome> {
        self.progress.finish();
        self.summary.complete = !interrupted;
        clock::clock_end(self.spec, &mut self.summary, self.progress);
        if let Some((writer, records)) = self.files.as_mut() {
            records.sync()?;
            writer.write_summary(&self.summary)?;
        }
        self.export()?;
        let conclusion = Conclusion::of(&self.summary).render();
        let (mut dir, mut report) = (None, None);
        if let Some((writer, _)) = &self.files {
            writer.write_conclusion(&conclusion)?;
            if self.spec.outputs.out.as_ref().is_some_and(|o| o.report) {
                let page = writer.dir().join(goodput_results::files::REPORT);
                goodput_report::html::write(&goodput_results::Results::read(writer.dir())?, &page)?;
                report = Some(page);
            }
            dir = Some(writer.dir().to_path_buf());
        }
        let simulation = self.simulated.then(|| {
            let (steps, simulated, t0) = self.sim_cost;
            Simulation { steps, simulated_s: simulated, wall_s: t0.elapsed().as_secs_f64().max(1e-9) }
        });
        let (exit, errors) = self.exit_status(interrupted);
        Ok(Outcome { summary: self.summary, conclusion, dir, report, simulation, exit, errors })
    }

    /// 130 when interrupted, 3 when a level measured no completed request (named, with why).
    fn exit_status(&self, interrupted: bool) -> (i32, Vec<String>) {
        if interrupted {
            return (
                super::EXIT_INTERRUPTED,
                vec!["goodput run: interrupted; the summary is marked incomplete".into()],
            );
        }
        let unit = self.spec.unit;
        let empty: Vec<_> = self.summary.levels.iter().filter(|l| l.summary.completed == 0).collect();
        let mut errors = Vec::new();
        for l in &empty {
            let mut why = failure_text(&l.summary.failures);
            if l.summary.requests == 0 && l.warmup_requests > 0 && l.harness.ramp_s.is_some() {
                why = format!(
                    "all {} requests were warm-up: the level ended before every user had started (the ramp and the first wave are warm-up); give it longer (--duration, --stages), or --ramp 0",
                    l.warmup_requests
                );
            }
            errors.push(format!("error: at {} {unit} no measured request completed: {why}", l.summary.load));
        }
        let exit = if empty.is_empty() { super::EXIT_OK } else { super::EXIT_NOTHING_COMPLETED };
        (exit, errors)
    }
}

/// A finished run: its summary and conclusion as written, where its files are, and its exit
/// status with why it is not 0.
pub struct Outcome {
    pub summary: RunSummary,
    /// The written conclusion (`conclusion.md`).
    pub conclusion: String,
    /// `--out`: the run's directory.
    pub dir: Option<std::path::PathBuf>,
    /// The report page, when one was asked for.
    pub report: Option<std::path::PathBuf>,
    /// `--simulate`: what the simulation cost.
    pub simulation: Option<Simulation>,
    /// [`super::EXIT_OK`], [`super::EXIT_NOTHING_COMPLETED`] or [`super::EXIT_INTERRUPTED`].
    pub exit: i32,
    /// Why `exit` is not 0, a line each.
    pub errors: Vec<String>,
}

pub use goodput_results::prediction::Simulation;

/// The run's summary before any level: its setup, workload and stored command line.
fn new_summary(spec: &RunSpec, rig: &Rig) -> RunSummary {
    let w = &rig.workload;
    RunSummary {
        format: FORMAT,
        goodput_version: env!("CARGO_PKG_VERSION").into(),
        model: spec.model.name.clone(),
        weights: rig.weights.clone(),
        device: rig.device.clone(),
        seed: spec.seed,
        seed_drawn: spec.seed_drawn,
        target: goodput_client::redact_url(spec.target.label()),
        engine: spec.engine_settings(),
        machine: machine(),
        cpus: rig.pinning.clone(),
        retry: RetrySetting { max: spec.retry.max, backoff_s: spec.retry.backoff.as_secs_f64() },
        scenario: w.to_json(),
        workload: WorkloadInfo { name: w.name(), description: w.describe(), lengths: w.describe_lengths() },
        load_unit: spec.unit,
        slos: spec.slos.clone(),
        levels: Vec::new(),
        capacity: None,
        complete: false,
        prediction: None,
        command: spec.outputs.command.clone().unwrap_or_default(),
        shard: spec.shard,
        start_at: None,
        clock: None,
        merged: None,
        search: spec.search.map(|s| goodput_results::SearchRecord {
            max_load: s.max_load,
            budget_s: s.budget.as_secs_f64(),
            stopped: None,
        }),
        soak: None,
    }
}

/// `--metrics-port`: the run's live metrics, served until the sweep ends.
fn start_exporter(
    spec: &RunSpec,
    summary: &RunSummary,
    progress: &dyn Progress,
) -> Result<Option<(Exporter, Serving)>> {
    let Some(addr) = spec.outputs.metrics else { return Ok(None) };
    let e = Exporter::new(&summary.model, &summary.workload.name, &summary.target, &spec.unit.to_string());
    let (serving, bound) = e.serve(addr)?;
    progress.line(&format!("goodput run: live metrics at http://{bound}/metrics"), true);
    Ok(Some((e, serving)))
}

/// `--out`: the run's directory, its record writer, and an inline scenario as a file of it.
fn create_files(spec: &RunSpec) -> Result<Option<(RunWriter, RecordWriter)>> {
    let Some(out) = &spec.outputs.out else { return Ok(None) };
    let (writer, log) = RunWriter::create(&out.dir, out.overwrite)?;
    if let Some(text) = &spec.outputs.scenario_toml {
        goodput_results::files::write_whole(&out.dir, goodput_results::files::SCENARIO, text.as_bytes())?;
    }
    Ok(Some((writer, RecordWriter::spawn(log)?)))
}

/// An explicit warm-up count below a closed-loop level's users: said once, before the run,
/// that the first wave is left out anyway.
fn warmup_note(spec: &RunSpec) -> Option<String> {
    // A warm-up of send time (`--warmup 5s`) is no count to set against the users.
    let Some(Span::Count(given)) = spec.per_level.warmup else { return None };
    let users = spec.levels.iter().filter_map(|l| match l.arrival {
        Arrival::Closed { users, .. } => Some(users),
        _ => None,
    });
    let most = users.max().filter(|&u| u > given)?;
    Some(format!(
        "--warmup {given} is fewer than the {most} users of a closed-loop level: every user's first request, and any sent before the last user started, is warm-up too (the measured count stays as asked)"
    ))
}

/// `12 http-503 ("the server is overloaded…"), 3 timeout`: the kinds of failure, most
/// frequent first, with the first message of the most frequent.
/// `2 usage.completion_tokens refused ("…"), 1 outputs over max_tokens ("…")`.
fn failure_text(failures: &[goodput_metrics::level::FailureCount]) -> String {
    let mut parts: Vec<String> = failures.iter().map(|f| format!("{} {}", f.count, f.kind)).collect();
    if let (Some(first), Some(top)) = (parts.first_mut(), failures.first()) {
        let example: String = top.example.chars().take(160).collect();
        first.push_str(&format!(" (\"{example}\")"));
    }
    if parts.is_empty() {
        "nothing was measured".into()
    } else {
        parts.join(", ")
    }
}
