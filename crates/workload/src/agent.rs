//! Agent tasks: one user request becomes several model calls, with tool calls and retrievals
//! between them. Each model call's prompt is the whole context so far (system + question +
//! every earlier output and tool result), so calls grow, and the prefix cache can serve what
//! was already seen. Tool and retrieval latencies are drawn from distributions (milliseconds).

use crate::drive::{send, Collector};
use crate::level::{LevelRun, UnitPlan};
use crate::scenario::{random_tokens, LengthDist, MAX_LATENCY_MS};
use crate::users::{closed_loop, Users};
use goodput_core::{ClientRecord, SamplingParams, StepKind, Target, TaskRecord, TaskStep, TokenId, WorkRequest};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

fn check_latency(latency_ms: &LengthDist, what: &str) -> Result<(), crate::Invalid> {
    latency_ms.validate(what)?;
    if latency_ms.max() > MAX_LATENCY_MS {
        let problem = format!(
            "latency_ms reaches {} ms; a step may wait at most {MAX_LATENCY_MS} ms (an hour)",
            latency_ms.max()
        );
        return Err(crate::Invalid::new(what, problem));
    }
    Ok(())
}

/// One step of an agent task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", deny_unknown_fields)]
pub enum AgentStep {
    /// A model call over the context so far; its output joins the context.
    Llm { output: LengthDist },
    /// A tool call: waits `latency_ms`, then its result joins the context.
    Tool { latency_ms: LengthDist, result_tokens: LengthDist },
    /// A knowledge-base retrieval: waits `latency_ms`, then the chunks join the context.
    Retrieve { latency_ms: LengthDist, tokens: LengthDist },
}

impl AgentStep {
    pub fn kind(&self) -> StepKind {
        match self {
            AgentStep::Llm { .. } => StepKind::Llm,
            AgentStep::Tool { .. } => StepKind::Tool,
            AgentStep::Retrieve { .. } => StepKind::Retrieve,
        }
    }
}

/// A step of the task's plan and the steps it waits for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentNode {
    #[serde(flatten)]
    pub step: AgentStep,
    /// 1-based numbers of earlier steps this one waits for: `after = [2, 3]` joins two
    /// branches, `after = []` starts with the task. Absent: the step before (a sequence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<usize>>,
}

impl From<AgentStep> for AgentNode {
    fn from(step: AgentStep) -> Self {
        AgentNode { step, after: None }
    }
}

/// An agent task: a sequence, or a small graph (a DAG: each step names earlier steps it waits
/// for), of model calls, tool calls and retrievals. Steps whose dependencies are done run at
/// once (parallel tool calls, fan-out model calls). A model call's prompt is the system prompt,
/// the question and what every step it depends on, directly or not, added, in step order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// System prompt tokens, shared by every task.
    pub system: usize,
    /// The user's request.
    pub question: LengthDist,
    pub steps: Vec<AgentNode>,
}

impl Agent {
    /// The built-in `agent`: plan (LLM) → tool → reason (LLM) → retrieve → answer (LLM):
    /// 3 model calls, 1 tool call and 1 retrieval per task.
    pub fn builtin() -> Self {
        Agent {
            system: 128,
            question: LengthDist::Uniform { min: 30, max: 80 },
            steps: vec![
                AgentStep::Llm { output: LengthDist::Uniform { min: 20, max: 40 } }.into(),
                AgentStep::Tool {
                    latency_ms: LengthDist::LogNormal { median: 150.0, sigma: 0.5, min: 20, max: 1000 },
                    result_tokens: LengthDist::Uniform { min: 50, max: 150 },
                }
                .into(),
                AgentStep::Llm { output: LengthDist::Uniform { min: 20, max: 40 } }.into(),
                AgentStep::Retrieve {
                    latency_ms: LengthDist::Uniform { min: 20, max: 60 },
                    tokens: LengthDist::Uniform { min: 100, max: 200 },
                }
                .into(),
                AgentStep::Llm { output: LengthDist::Uniform { min: 60, max: 120 } }.into(),
            ],
        }
    }

    pub fn model_calls(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s.step, AgentStep::Llm { .. })).count()
    }

    /// The 0-based steps step `i` waits for.
    pub fn deps(&self, i: usize) -> Vec<usize> {
        match &self.steps[i].after {
            Some(after) => {
                let mut d: Vec<usize> = after.iter().filter(|&&a| a >= 1 && a <= i).map(|a| a - 1).collect();
                d.sort_unstable();
                d.dedup();
                d
            }
            None => i.checked_sub(1).into_iter().collect(),
        }
    }

    /// Every step `i` depends on, directly or not, in step order.
    pub fn ancestors(&self, i: usize) -> Vec<usize> {
        let mut seen = vec![false; self.steps.len()];
        let mut stack = self.deps(i);
        while let Some(d) = stack.pop() {
            if !std::mem::replace(&mut seen[d], true) {
                stack.extend(self.deps(d));
            }
        }
        (0..self.steps.len()).filter(|&j| seen[j]).collect()
    }

    /// Tokens step `i` adds to the context, at most.
    fn added_max(&self, i: usize) -> usize {
        match &self.steps[i].step {
            AgentStep::Llm { output } => output.max(),
            AgentStep::Tool { result_tokens, .. } => result_tokens.max(),
            AgentStep::Retrieve { tokens, .. } => tokens.max(),
        }
    }

    /// The largest context a model call can reach: its prompt plus its output.
    pub fn max_context(&self) -> usize {
        (0..self.steps.len())
            .filter(|&i| matches!(self.steps[i].step, AgentStep::Llm { .. }))
            // Saturating, as a file's lengths may be anything.
            .map(|i| {
                let added =
                    self.ancestors(i).iter().fold(self.added_max(i), |a, &j| a.saturating_add(self.added_max(j)));
                self.system.saturating_add(self.question.max()).saturating_add(added)
            })
            .max()
            .unwrap_or(0)
    }

    /// Whether any step departs from "after the step before".
    fn is_graph(&self) -> bool {
        self.steps.iter().enumerate().any(|(i, s)| s.after.is_some() && s.after.as_deref() != Some(&[i][..]))
    }

    /// Whether the sessions fit a model of `max_model_len` positions, and every step's
    /// latency is at most [`MAX_LATENCY_MS`].
    pub fn validate(&self, max_model_len: usize) -> Result<(), crate::WorkloadError> {
        Ok(self.check(max_model_len)?)
    }

    fn check(&self, max_model_len: usize) -> Result<(), crate::Invalid> {
        if self.model_calls() == 0 {
            return Err(crate::Invalid::new("agent", "a task needs at least one llm step"));
        }
        self.question.validate("agent question")?;
        for (i, node) in self.steps.iter().enumerate() {
            let what = format!("agent step {} ({})", i + 1, node.step.kind());
            if let Some(bad) = node.after.iter().flatten().find(|&&a| a == 0 || a > i) {
                let problem = format!("after = {bad}, but a step can only wait for earlier steps (1 to {i}, 1-based)");
                return Err(crate::Invalid::new(what, problem));
            }
            match &node.step {
                AgentStep::Llm { output } => output.validate(&what)?,
                AgentStep::Tool { latency_ms, result_tokens } => {
                    check_latency(latency_ms, &what)?;
                    result_tokens.validate(&what)?
                }
                AgentStep::Retrieve { latency_ms, tokens } => {
                    check_latency(latency_ms, &what)?;
                    tokens.validate(&what)?
                }
            }
        }
        if self.max_context() > max_model_len {
            return Err(crate::Invalid::new(
                "agent",
                format!(
                    "a task can reach {} tokens of context, beyond the model's {max_model_len}",
                    self.max_context()
                ),
            ));
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        let plan = if self.is_graph() {
            (0..self.steps.len())
                .map(|i| {
                    let d: Vec<String> = self.deps(i).iter().map(|d| (d + 1).to_string()).collect();
                    let kind = self.steps[i].step.kind();
                    if d.is_empty() {
                        format!("{} {kind}", i + 1)
                    } else {
                        format!("{} {kind} (after {})", i + 1, d.join(","))
                    }
                })
                .collect::<Vec<_>>()
                .join("; ")
        } else {
            self.steps.iter().map(|s| s.step.kind().name()).collect::<Vec<_>>().join(" → ")
        };
        format!("agent: {plan} (system {}, question {} tokens)", self.system, self.question.describe())
    }
}

/// What one step of one task will do, drawn before the task runs (so a task is the same
/// whatever order its parallel steps finish in).
enum Drawn {
    Llm { n_out: usize, call: u64 },
    Wait { ms: u64, tokens: Vec<TokenId> },
}

/// What a finished step hands back.
struct Done {
    index: usize,
    step: TaskStep,
    added: Vec<TokenId>,
    record: Option<ClientRecord>,
}

/// Where a task stands: what each step added to the context and how it ran.
struct Progress {
    added: Vec<Option<Vec<TokenId>>>,
    finished: Vec<Option<TaskStep>>,
    started: Vec<bool>,
    /// Every model call so far ended with its end marker.
    ok: bool,
}

/// What every task of a level needs.
struct Tasks<T> {
    target: Arc<T>,
    agent: Arc<Agent>,
    vocab: usize,
    plan: UnitPlan,
    /// The system prompt every task starts with.
    system: Vec<TokenId>,
    collector: Collector,
}

impl<T: Target> Tasks<T> {
    fn calls(&self) -> u64 {
        self.agent.model_calls() as u64
    }

    /// The task's opening context (system prompt and question) and what each step will do.
    fn draw(&self, task: u64) -> (Vec<TokenId>, Vec<Drawn>) {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(self.plan.seed ^ task.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let n_q = self.agent.question.sample(&mut rng);
        let mut base = self.system.clone();
        base.extend(random_tokens(&mut rng, n_q, self.vocab));
        let mut call = 0u64;
        let drawn = self.agent.steps.iter().map(|node| match &node.step {
            AgentStep::Llm { output } => {
                call += 1;
                Drawn::Llm { n_out: output.sample(&mut rng), call }
            }
            AgentStep::Tool { latency_ms, result_tokens: n } | AgentStep::Retrieve { latency_ms, tokens: n } => {
                let ms = latency_ms.sample(&mut rng) as u64;
                let n = n.sample(&mut rng);
                Drawn::Wait { ms, tokens: random_tokens(&mut rng, n, self.vocab) }
            }
        });
        let drawn = drawn.collect();
        (base, drawn)
    }

    /// Task number `t` of the level: its steps as their dependencies allow, until one fails.
    async fn task(self: Arc<Self>, t: u64) {
        let task = self.plan.first_id / self.calls().max(1) + t;
        let (base, drawn) = self.draw(task);
        let task_start = self.target.clock().now();
        let n = self.agent.steps.len();
        let mut p = Progress { added: vec![None; n], finished: vec![None; n], started: vec![false; n], ok: true };
        let mut running = JoinSet::new();
        loop {
            // Start every step whose dependencies are done (none after a failure).
            for (i, drawn) in drawn.iter().enumerate() {
                if p.ok && !p.started[i] && self.agent.deps(i).iter().all(|&d| p.added[d].is_some()) {
                    p.started[i] = true;
                    running.spawn(self.clone().step(i, t, task, drawn, &base, &p.added));
                }
            }
            let Some(joined) = running.join_next().await else { break };
            match joined {
                Ok(done) => {
                    if let Some(rec) = done.record {
                        p.ok &= rec.is_ok();
                        self.collector.push(rec);
                    }
                    p.finished[done.index] = Some(done.step);
                    p.added[done.index] = Some(done.added);
                }
                Err(_) => p.ok = false,
            }
        }
        let ok = p.ok && p.finished.iter().all(Option::is_some);
        let steps: Vec<TaskStep> = p.finished.into_iter().flatten().collect();
        self.collector.push_task(TaskRecord { task, start: task_start, end: self.target.clock().now(), steps, ok });
    }

    /// Step `i` of task `task` (number `t` of the level), to be spawned: a model call over
    /// `base` and what the steps it depends on `added`, or a wait.
    fn step(
        self: Arc<Self>,
        i: usize,
        t: u64,
        task: u64,
        drawn: &Drawn,
        base: &[TokenId],
        added: &[Option<Vec<TokenId>>],
    ) -> impl std::future::Future<Output = Done> + Send + 'static {
        let kind = self.agent.steps[i].step.kind();
        let work = match drawn {
            Drawn::Llm { n_out, call } => {
                let mut prompt = base.to_vec();
                for a in self.agent.ancestors(i) {
                    prompt.extend_from_slice(added[a].as_deref().unwrap_or_default());
                }
                let id = self.plan.first_id + t * self.calls() + (call - 1);
                let req = WorkRequest { session: Some(task), id, prompt, params: SamplingParams::greedy_exact(*n_out) };
                Ok((req, *call))
            }
            Drawn::Wait { ms, tokens } => Err((*ms, tokens.clone())),
        };
        async move {
            let s0 = self.target.clock().now();
            let (added, record) = match work {
                Ok((req, call)) => {
                    let mut rec = send(&*self.target, req, s0, self.plan.timeout, self.plan.retry).await;
                    rec.session = Some(task);
                    rec.turn = Some(call as u32);
                    (std::mem::take(&mut rec.output_ids), Some(rec))
                }
                Err((ms, tokens)) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    (tokens, None)
                }
            };
            let step = TaskStep { kind, start: s0, end: self.target.clock().now() };
            Done { index: i, step, added, record }
        }
    }
}

/// Runs `warmup + units + cooldown` tasks over `users` closed-loop users. Model calls are the
/// records (session = task, turn = call number); the measured tasks are in the second part.
pub async fn run_tasks<T: Target>(
    target: Arc<T>,
    agent: Arc<Agent>,
    vocab: usize,
    plan: UnitPlan,
) -> (LevelRun, Vec<TaskRecord>) {
    let clock = target.clock();
    let start = clock.now();
    let calls = agent.model_calls() as u64;
    let window = plan.window(calls, start);
    let mut sys_rng = rand::rngs::SmallRng::seed_from_u64(plan.seed ^ 0xA6E7);
    let system = random_tokens(&mut sys_rng, agent.system, vocab);
    let collector = Collector::new(window, false, &plan).closed(calls);
    let users = Users::of(&plan, None);
    let (first_task, units) = (plan.first_id / calls.max(1), plan.units as u64);
    let tasks = Arc::new(Tasks { target, agent, vocab, plan, system, collector });
    let t = tasks.clone();
    let started = closed_loop(users, tasks.clone(), move |w| t.collector.warmed(w), Tasks::task).await;
    let (mut run, mut tasks) = tasks.collector.finish(start, clock.now(), |_| window);
    run.ramp = Some(started.ramp);
    let measured = first_task + started.warmup..first_task + started.warmup + units;
    tasks.retain(|t| measured.contains(&t.task));
    (run, tasks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{Chunk, Clock, Outcome, Stamp};
    use std::sync::Mutex;

    /// Answers each call after 20 ms with `max_tokens` ids, and remembers its prompt length.
    struct Echo {
        clock: Clock,
        prompts: Mutex<Vec<(u64, usize)>>,
    }

    impl Target for Echo {
        fn clock(&self) -> Clock {
            self.clock
        }
        fn describe(&self) -> String {
            "echo".into()
        }
        async fn run(&self, req: WorkRequest, intended: Stamp) -> ClientRecord {
            self.prompts.lock().unwrap().push((req.id, req.prompt.len()));
            tokio::time::sleep(Duration::from_millis(20)).await;
            let n = req.params.max_tokens;
            let mut r = ClientRecord::unanswered(req.id, intended, req.prompt.len(), self.clock.now(), Outcome::Ok);
            r.chunks = vec![Chunk { at: r.end, tokens: n as u32 }];
            r.output_tokens = n;
            r.output_ids = vec![7; n];
            r
        }
    }

    fn fixed(n: usize) -> LengthDist {
        LengthDist::Fixed { n }
    }

    /// plan (llm) → two tools at once → merge (llm, after both).
    fn fan_out() -> Agent {
        let tool = |ms, n| AgentNode {
            step: AgentStep::Tool { latency_ms: fixed(ms), result_tokens: fixed(n) },
            after: Some(vec![1]),
        };
        Agent {
            system: 10,
            question: fixed(5),
            steps: vec![
                AgentStep::Llm { output: fixed(3) }.into(),
                tool(100, 20),
                tool(150, 30),
                AgentNode { step: AgentStep::Llm { output: fixed(4) }, after: Some(vec![2, 3]) },
            ],
        }
    }

    #[test]
    fn graph_dependencies_ancestors_and_validation() {
        let a = fan_out();
        assert_eq!(a.deps(0), Vec::<usize>::new());
        assert_eq!(a.deps(2), vec![0]);
        assert_eq!(a.deps(3), vec![1, 2]);
        assert_eq!(a.ancestors(3), vec![0, 1, 2]);
        // The merge call sees 10 + 5 + 3 + 20 + 30 tokens and adds 4.
        assert_eq!(a.max_context(), 72);
        a.validate(72).unwrap();
        assert!(a.validate(71).unwrap_err().to_string().contains("72 tokens"));
        assert!(a.describe().contains("4 llm (after 2,3)"), "{}", a.describe());
        let mut bad = fan_out();
        bad.steps[1].after = Some(vec![2]);
        assert!(bad.validate(1000).unwrap_err().to_string().contains("step 2 (tool): after = 2"));
        // A sequence is described as one.
        assert!(Agent::builtin().describe().contains("llm → tool → llm"));
        assert_eq!(Agent::builtin().ancestors(4), vec![0, 1, 2, 3]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parallel_steps_overlap_and_the_join_sees_both_branches() {
        let target = Arc::new(Echo { clock: Clock::new(), prompts: Mutex::new(Vec::new()) });
        let plan = UnitPlan { first_id: 0, ..crate::testing::units(1, 2, 0) };
        let (run, tasks) = run_tasks(target.clone(), Arc::new(fan_out()), 1000, plan).await;
        // The user's first task is warm-up (a closed loop's first wave always is): 3 tasks of
        // 2 calls, the last 2 measured.
        assert_eq!(run.records.len(), 6);
        assert_eq!(tasks.iter().map(|t| t.task).collect::<Vec<_>>(), [1, 2]);
        for t in &tasks {
            assert!(t.ok);
            assert_eq!(t.steps.iter().map(|s| s.kind.name()).collect::<Vec<_>>(), ["llm", "tool", "tool", "llm"]);
            // The tools ran side by side: the task takes ≈ 20 + 150 + 20 ms, not 20 + 250 + 20.
            let (a, b) = (&t.steps[1], &t.steps[2]);
            assert!(a.start.secs_since(b.start).abs() < 0.01);
            let e2e = t.end.secs_since(t.start);
            assert!((0.185..0.28).contains(&e2e), "{e2e}");
            assert!(t.steps[3].start >= b.end);
        }
        let prompts = target.prompts.lock().unwrap();
        let mut merge: Vec<usize> = prompts.iter().filter(|(id, _)| id % 2 == 1).map(|p| p.1).collect();
        merge.sort();
        assert_eq!(merge, [68, 68, 68], "system + question + plan output + both tool results");
    }

    #[test]
    fn a_tool_that_waits_beyond_an_hour_is_refused() {
        let mut a = fan_out();
        a.validate(2048).unwrap();
        a.steps[1].step = AgentStep::Tool { latency_ms: fixed(i64::MAX as usize), result_tokens: fixed(3) };
        let err = a.validate(2048).unwrap_err().to_string();
        assert!(err.contains("agent step 2 (tool)") && err.contains("at most 3600000 ms"), "{err}");
    }
}
