//! What a run sends, as one value: single requests of a scenario, multi-turn sessions, agent
//! tasks or RAG queries. Each names and describes itself, writes itself into results files,
//! and runs a level through its own driver, so a front end holds a `Workload` and a
//! [`LevelPlan`] and never matches on the kind (hyperfine's manner: the benchmark owns how
//! it runs, the front end only wires).

use crate::agent::{run_tasks, Agent};
use crate::file::ScenarioFile;
use crate::level::{LevelPlan, LevelRun};
use crate::multiturn::{run_sessions, MultiTurn};
use crate::rag::{run_rag, Rag, RagSetup};
use crate::runner::run_level;
use crate::scenario::Scenario;
use goodput_core::{Target, TaskRecord};
use std::sync::Arc;

/// What a run sends.
#[derive(Clone)]
pub enum Workload {
    /// Single requests of a scenario, closed or open loop.
    Single(Arc<Scenario>),
    /// Multi-turn chat sessions, closed loop.
    Sessions(Arc<MultiTurn>),
    /// Agent tasks, closed loop.
    Tasks(Arc<Agent>),
    /// RAG queries over a built corpus, closed loop.
    Rag(Arc<RagSetup>),
    /// Prompts of a dataset file: first turns as single requests (closed or open loop), or
    /// whole conversations as sessions (closed loop).
    Dataset(Arc<crate::dataset::Dataset>),
    /// A trace's requests at its times (open loop, [`crate::Arrival::Trace`]).
    Trace(Arc<crate::trace::Trace>),
}

/// What one level of a workload produced.
#[derive(Clone, Debug)]
pub struct LevelOutput {
    /// The model calls.
    pub run: LevelRun,
    /// The measured tasks (agent tasks, RAG queries with their stages); empty otherwise.
    pub tasks: Vec<TaskRecord>,
}

impl Workload {
    /// The workload of a scenario file; a RAG scenario becomes a corpus and its index through
    /// `rag` (which loads the encoder and embeds the corpus).
    pub fn from_file<E>(spec: ScenarioFile, rag: impl FnOnce(Rag) -> Result<RagSetup, E>) -> Result<Self, E> {
        Ok(match spec {
            ScenarioFile::Single(s) => Workload::Single(Arc::new(s)),
            ScenarioFile::MultiTurn(mt) => Workload::Sessions(Arc::new(mt)),
            ScenarioFile::Agent(ag) => Workload::Tasks(Arc::new(ag)),
            ScenarioFile::Rag(r) => Workload::Rag(Arc::new(rag(r)?)),
        })
    }

    /// Whether the workload runs in units of several stages or requests (sessions, tasks,
    /// queries): closed loop only, counts only.
    pub fn is_sessions(&self) -> bool {
        match self {
            Workload::Single(_) | Workload::Trace(_) => false,
            Workload::Dataset(d) => d.options.sessions,
            _ => true,
        }
    }

    /// Whether no two prompts are meant to share a prefix (single requests of a scenario
    /// without `shared_prefix`; sessions re-send their history, agents and RAG share their
    /// system prompts on purpose).
    pub fn unique_prompts(&self) -> bool {
        match self {
            Workload::Single(s) => s.shared_prefix == 0,
            Workload::Dataset(d) => !d.options.sessions,
            Workload::Trace(t) => t.entries.iter().all(|e| e.hash_ids.is_empty()),
            _ => false,
        }
    }

    /// Requests per unit of a plan's counts (a session is `turns` requests, a task its model
    /// calls).
    pub fn requests_per_unit(&self) -> usize {
        match self {
            Workload::Single(_) | Workload::Rag(_) => 1,
            Workload::Sessions(mt) => mt.turns as usize,
            Workload::Tasks(ag) => ag.model_calls(),
            Workload::Dataset(d) if d.options.sessions => d.max_turns(),
            Workload::Dataset(_) | Workload::Trace(_) => 1,
        }
    }

    /// The scenario's name: its own for single requests, else `multi-turn`, `agent`, `rag`.
    pub fn name(&self) -> String {
        match self {
            Workload::Single(s) => s.name.clone(),
            Workload::Sessions(_) => "multi-turn".into(),
            Workload::Tasks(_) => "agent".into(),
            Workload::Rag(_) => "rag".into(),
            Workload::Dataset(d) => d.name.clone(),
            Workload::Trace(t) => t.name.clone(),
        }
    }

    /// One line for reports, starting with the name.
    pub fn describe(&self) -> String {
        match self {
            Workload::Single(s) => s.describe(),
            Workload::Sessions(mt) => mt.describe(),
            Workload::Tasks(ag) => ag.describe(),
            Workload::Rag(setup) => setup.rag.describe(),
            Workload::Dataset(d) => d.describe(),
            Workload::Trace(t) => t.describe(),
        }
    }

    /// [`Workload::describe`] without the name.
    pub fn describe_lengths(&self) -> String {
        match self {
            Workload::Single(s) => s.describe_lengths(),
            Workload::Sessions(mt) => mt.describe().trim_start_matches("multi-turn: ").to_string(),
            Workload::Tasks(ag) => ag.describe().trim_start_matches("agent: ").to_string(),
            Workload::Rag(setup) => setup.rag.describe().trim_start_matches("rag: ").to_string(),
            Workload::Dataset(d) => d.describe().split_once(": ").map_or_else(String::new, |x| x.1.to_string()),
            Workload::Trace(t) => t.describe().split_once(": ").map_or_else(String::new, |x| x.1.to_string()),
        }
    }

    /// The workload as results files hold it: the scenario itself for single requests, else
    /// `{"name": …, <kind>: …}` (RAG adds its `encoder`).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Workload::Single(s) => serde_json::json!(s.as_ref()),
            Workload::Sessions(mt) => serde_json::json!({ "name": "multi-turn", "multi_turn": mt.as_ref() }),
            Workload::Tasks(ag) => serde_json::json!({ "name": "agent", "agent": ag.as_ref() }),
            Workload::Rag(setup) => serde_json::json!({
                "name": "rag",
                "rag": &setup.rag,
                "encoder": setup.describe_encoder(),
            }),
            Workload::Dataset(d) => serde_json::json!({
                "name": d.name,
                "dataset": { "options": d.options, "conversations": d.conversations.len(), "read": d.read,
                             "filtered": d.filtered, "description": d.describe() },
            }),
            Workload::Trace(t) => serde_json::json!({
                "name": t.name,
                "trace": { "options": t.options, "requests": t.entries.len(), "span_s": t.span_s,
                           "too_long": t.too_long, "description": t.describe() },
            }),
        }
    }

    /// Runs one level against `target` (prompts drawn from `vocab` token ids); returns when
    /// every request has ended. Sessions, tasks and queries run closed loop with
    /// `plan.unit.users` users and ignore the arrival, duration and time trim (a front end
    /// rejects those for them).
    pub async fn run<T: Target>(&self, target: Arc<T>, vocab: usize, plan: LevelPlan) -> LevelOutput {
        let (run, tasks) = match self {
            Workload::Single(s) => (run_level(target, s.clone(), vocab, plan).await, Vec::new()),
            Workload::Sessions(mt) => (run_sessions(target, mt.clone(), vocab, plan.unit).await, Vec::new()),
            Workload::Tasks(ag) => run_tasks(target, ag.clone(), vocab, plan.unit).await,
            Workload::Rag(setup) => run_rag(target, setup.clone(), plan.unit).await,
            Workload::Dataset(d) if d.options.sessions => {
                (crate::dataset::run_dataset_sessions(target, d.clone(), plan.unit).await, Vec::new())
            }
            Workload::Dataset(d) => (run_level(target, d.clone(), vocab, plan).await, Vec::new()),
            Workload::Trace(t) => (run_level(target, t.clone(), vocab, plan).await, Vec::new()),
        };
        LevelOutput { run, tasks }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{AgentNode, AgentStep};
    use crate::level::{Arrival, Trim, UnitPlan};
    use crate::rag::HashEmbedder;
    use crate::scenario::LengthDist;
    use crate::testing::{fake, units, Fake};
    use crate::RecordSink;
    use goodput_core::TextCodec;
    use goodput_core::{Phase, Stamp};
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::Duration;

    /// What the sink saw: each record's id and phase, and when it was reported.
    type Seen = Arc<Mutex<Vec<(u64, Phase, Stamp)>>>;

    fn sink(target: &Fake) -> (RecordSink, Seen) {
        let (seen, clock) = (Seen::default(), target.clock);
        let s = seen.clone();
        (RecordSink::new(move |r, p| s.lock().unwrap().push((r.id, p, clock.now()))), seen)
    }

    /// Every record reached the sink once, with the phase the level gives it; returns the
    /// report time of each id.
    fn check_reports(run: &LevelRun, seen: &Seen) -> HashMap<u64, Stamp> {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), run.records.len());
        let reports: HashMap<u64, (Phase, Stamp)> = seen.iter().map(|&(id, p, at)| (id, (p, at))).collect();
        assert_eq!(reports.len(), seen.len(), "each record is reported once");
        for r in &run.records {
            assert_eq!(reports[&r.id].0, run.phase(r), "request {}", r.id);
        }
        reports.into_iter().map(|(id, (_, at))| (id, at)).collect()
    }

    fn single() -> Workload {
        Workload::Single(Arc::new(Scenario::builtin("short-qa", 2048).unwrap()))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_loop_reports_each_record_as_it_finishes() {
        let t = fake(10);
        let (sink, seen) = sink(&t);
        // One user: each record must be reported before the next request is due.
        let unit = UnitPlan { cooldown: 3, sink: Some(sink), ..units(1, 6, 2) };
        let plan = LevelPlan::new(Arrival::Closed { users: 1, think: Duration::ZERO }, unit);
        let out = single().run(t, 1000, plan).await;
        assert_eq!(out.run.excluded(), (2, 3));
        let at = check_reports(&out.run, &seen);
        let mut records = out.run.records.clone();
        records.sort_by_key(|r| r.id);
        for w in records.windows(2) {
            assert!(at[&w[0].id] <= w[1].intended, "request {} reported after {} was due", w[0].id, w[1].id);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_end_trim_without_a_duration_holds_back_what_it_may_still_change() {
        let t = fake(5);
        let (sink, seen) = sink(&t);
        // 100 req/s for 20 requests, trimmed 45 ms at both ends: warm-up is certain when it
        // finishes; whether a later one is measured waits for the last send (at 190 ms).
        let trim = Trim { start: Duration::from_millis(45), end: Duration::from_millis(45) };
        let unit = UnitPlan { sink: Some(sink), ..units(1, 20, 0) };
        let plan = LevelPlan { trim, ..LevelPlan::new(Arrival::Rate { rate: 100.0, burstiness: None }, unit) };
        let out = single().run(t.clone(), 1000, plan.clone()).await;
        assert_eq!(out.run.excluded(), (5, 5));
        let at = check_reports(&out.run, &seen);
        for r in &out.run.records {
            let early = out.run.phase(r) == Phase::Warmup;
            assert_eq!(at[&r.id] < out.run.end, early, "request {} ({:?})", r.id, out.run.phase(r));
        }
        // With a duration the end of sending is known: nothing waits.
        let (sink, seen) = self::sink(&t);
        let plan = LevelPlan {
            duration: Some(Duration::from_millis(150)),
            unit: UnitPlan { sink: Some(sink), units: 1000, ..plan.unit },
            ..plan
        };
        let out = single().run(t, 1000, plan).await;
        let at = check_reports(&out.run, &seen);
        assert!(out.run.excluded().1 >= 4, "{:?}", out.run.excluded());
        assert!(out.run.records.iter().all(|r| at[&r.id] < out.run.end));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sessions_and_tasks_report_every_call_before_the_level_ends() {
        let mt = MultiTurn {
            turns: 2,
            system: 8,
            user: LengthDist::Fixed { n: 4 },
            output: LengthDist::Fixed { n: 3 },
            think_ms: 0,
        };
        let tool =
            AgentStep::Tool { latency_ms: LengthDist::Fixed { n: 5 }, result_tokens: LengthDist::Fixed { n: 4 } };
        let llm = AgentStep::Llm { output: LengthDist::Fixed { n: 3 } };
        let agent = Agent {
            system: 8,
            question: LengthDist::Fixed { n: 4 },
            steps: vec![AgentNode::from(llm.clone()), tool.into(), llm.into()],
        };
        for (w, tasks) in [(Workload::Sessions(Arc::new(mt)), 0), (Workload::Tasks(Arc::new(agent)), 3)] {
            let t = fake(5);
            let (sink, seen) = sink(&t);
            let unit = UnitPlan { cooldown: 1, sink: Some(sink), ..units(2, 3, 1) };
            let plan = LevelPlan::new(Arrival::Closed { users: 2, think: Duration::ZERO }, unit);
            let out = w.run(t, 1000, plan).await;
            // Sessions of 2 calls: both users' first sessions are warm-up (perhaps a third,
            // taken as the first of them ended), 3 measured, 1 cool-down.
            let (warm, cool) = out.run.excluded();
            assert!(warm == 4 || warm == 6, "{}: {warm}", w.name());
            assert_eq!((out.run.records.len(), cool), (warm + 8, 2), "{}", w.name());
            assert_eq!(out.tasks.len(), tasks, "{}", w.name());
            let at = check_reports(&out.run, &seen);
            assert!(out.run.records.iter().all(|r| at[&r.id] < out.run.end));
        }
    }

    /// One token per byte.
    struct Bytes;
    impl TextCodec for Bytes {
        fn encode(&self, text: &str) -> Result<Vec<u32>, goodput_core::CodecError> {
            Ok(text.bytes().map(u32::from).collect())
        }
        fn decode(&self, ids: &[u32]) -> Result<String, goodput_core::CodecError> {
            Ok(ids.iter().map(|&i| char::from(i as u8)).collect())
        }
    }

    fn rag(encoder: Option<&str>) -> Workload {
        let rag = Rag { corpus_chunks: 20, output: LengthDist::Fixed { n: 4 }, ..Rag::builtin() };
        let embedder = Arc::new(HashEmbedder { dims: 64 });
        let setup = RagSetup::build(rag, embedder, Arc::new(Bytes), encoder.map(Into::into), 1).unwrap();
        Workload::Rag(Arc::new(setup))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rag_queries_run_through_the_workload_with_their_stages() {
        let t = fake(5);
        let (sink, seen) = sink(&t);
        let plan = LevelPlan::new(
            Arrival::Closed { users: 2, think: Duration::ZERO },
            UnitPlan { sink: Some(sink), ..units(2, 4, 1) },
        );
        let out = rag(None).run(t.clone(), 1000, plan).await;
        let warm = out.run.excluded().0;
        assert!((2..=3).contains(&warm), "both users' first queries, perhaps one more: {warm}");
        assert_eq!(out.run.records.len(), warm + 4);
        assert!(out.run.records.iter().all(|r| r.is_ok()));
        assert_eq!(out.tasks.len(), 4, "the measured queries");
        let kinds: Vec<&str> = out.tasks[0].steps.iter().map(|s| s.kind.name()).collect();
        assert_eq!(kinds, ["embed", "retrieve", "rerank", "assemble", "llm"]);
        check_reports(&out.run, &seen);
        // Without an encoder, each query's embed stage was a prefill pass through the target.
        assert!(t.peak.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    }

    #[test]
    fn names_descriptions_and_results_json_are_as_before() {
        let s = single();
        assert_eq!(s.name(), "short-qa");
        assert!(!s.is_sessions());
        assert_eq!(s.to_json()["input"], serde_json::json!({ "kind": "uniform", "min": 50, "max": 200 }));
        let mt = Workload::Sessions(Arc::new(MultiTurn::builtin()));
        assert_eq!((mt.name().as_str(), mt.requests_per_unit(), mt.is_sessions()), ("multi-turn", 4, true));
        assert!(mt.describe_lengths().starts_with("4 turns"), "{}", mt.describe_lengths());
        assert_eq!(mt.to_json()["multi_turn"]["turns"], 4);
        let ag = Workload::Tasks(Arc::new(Agent::builtin()));
        assert_eq!((ag.name().as_str(), ag.requests_per_unit()), ("agent", 3));
        assert_eq!(ag.to_json()["name"], "agent");
        let r = rag(None);
        assert_eq!((r.name().as_str(), r.requests_per_unit()), ("rag", 1));
        assert!(r.describe_lengths().starts_with("corpus 20 chunks"), "{}", r.describe_lengths());
        let json = r.to_json();
        assert_eq!(json["encoder"], "none: the engine's prefill-only pass");
        assert_eq!(json["rag"]["corpus_chunks"], 20);
        assert_eq!(json.as_object().unwrap().len(), 3);
        assert_eq!(rag(Some("/models/minilm")).to_json()["encoder"], "/models/minilm");
    }

    #[test]
    fn a_scenario_file_keeps_its_name_and_builds_rag_only_when_asked() {
        let files = [
            ScenarioFile::Single(Scenario::builtin("long-gen", 4096).unwrap()),
            ScenarioFile::MultiTurn(MultiTurn::builtin()),
            ScenarioFile::Agent(Agent::builtin()),
        ];
        for f in files {
            let name = f.name();
            let w = Workload::from_file(f, |_| Err("no rag here")).unwrap();
            assert_eq!(w.name(), name);
        }
        let f = ScenarioFile::Rag(Rag::builtin());
        assert_eq!(f.name(), "rag");
        assert_eq!(Workload::from_file(f, |_| Err("no encoder")).err(), Some("no encoder"));
    }
}
