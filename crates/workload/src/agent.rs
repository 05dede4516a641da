//! Agent tasks: one user request becomes several model calls, with tool calls and retrievals
//! between them. Each model call's prompt is the whole context so far (system + question +
//! every earlier output and tool result), so calls grow, and the prefix cache can serve what
//! was already seen. Tool and retrieval latencies are drawn from distributions (milliseconds).

use crate::runner::{send, LevelRun, UnitPlan};
use crate::scenario::{random_tokens, LengthDist};
use goodput_core::{SamplingParams, Target, TaskRecord, TaskStep, TokenId, WorkRequest};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One step of an agent task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum AgentStep {
    /// A model call over the context so far; its output joins the context.
    Llm { output: LengthDist },
    /// A tool call: waits `latency_ms`, then its result joins the context.
    Tool { latency_ms: LengthDist, result_tokens: LengthDist },
    /// A knowledge-base retrieval: waits `latency_ms`, then the chunks join the context.
    Retrieve { latency_ms: LengthDist, tokens: LengthDist },
}

impl AgentStep {
    pub fn kind(&self) -> &'static str {
        match self {
            AgentStep::Llm { .. } => "llm",
            AgentStep::Tool { .. } => "tool",
            AgentStep::Retrieve { .. } => "retrieve",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    /// System prompt tokens, shared by every task.
    pub system: usize,
    /// The user's request.
    pub question: LengthDist,
    pub steps: Vec<AgentStep>,
}

impl Agent {
    /// The built-in `agent`: plan (LLM) → tool → reason (LLM) → retrieve → answer (LLM):
    /// 3 model calls, 1 tool call and 1 retrieval per task.
    pub fn builtin() -> Self {
        Agent {
            system: 128,
            question: LengthDist::Uniform { min: 30, max: 80 },
            steps: vec![
                AgentStep::Llm { output: LengthDist::Uniform { min: 20, max: 40 } },
                AgentStep::Tool {
                    latency_ms: LengthDist::LogNormal { median: 150.0, sigma: 0.5, min: 20, max: 1000 },
                    result_tokens: LengthDist::Uniform { min: 50, max: 150 },
                },
                AgentStep::Llm { output: LengthDist::Uniform { min: 20, max: 40 } },
                AgentStep::Retrieve {
                    latency_ms: LengthDist::Uniform { min: 20, max: 60 },
                    tokens: LengthDist::Uniform { min: 100, max: 200 },
                },
                AgentStep::Llm { output: LengthDist::Uniform { min: 60, max: 120 } },
            ],
        }
    }

    pub fn model_calls(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s, AgentStep::Llm { .. })).count()
    }

    /// The largest context the last model call can see.
    pub fn max_context(&self) -> usize {
        self.system
            + self.question.max()
            + self
                .steps
                .iter()
                .map(|s| match s {
                    AgentStep::Llm { output } => output.max(),
                    AgentStep::Tool { result_tokens, .. } => result_tokens.max(),
                    AgentStep::Retrieve { tokens, .. } => tokens.max(),
                })
                .sum::<usize>()
    }

    pub fn validate(&self, max_model_len: usize) -> Result<(), String> {
        if self.model_calls() == 0 {
            return Err("agent: a task needs at least one llm step".into());
        }
        self.question.validate("agent question")?;
        for (i, s) in self.steps.iter().enumerate() {
            let what = format!("agent step {} ({})", i + 1, s.kind());
            match s {
                AgentStep::Llm { output } => output.validate(&what)?,
                AgentStep::Tool { latency_ms, result_tokens } => {
                    latency_ms.validate(&what)?;
                    result_tokens.validate(&what)?
                }
                AgentStep::Retrieve { latency_ms, tokens } => {
                    latency_ms.validate(&what)?;
                    tokens.validate(&what)?
                }
            }
        }
        if self.max_context() > max_model_len {
            return Err(format!(
                "agent: a task can reach {} tokens of context, beyond the model's {max_model_len}",
                self.max_context()
            ));
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        let kinds: Vec<&str> = self.steps.iter().map(AgentStep::kind).collect();
        format!("agent: {} (system {}, question {} tokens)", kinds.join(" → "), self.system, self.question.describe())
    }
}

/// Runs `warmup + tasks` tasks over `users` closed-loop users. Model calls are the records
/// (session = task, turn = call number); tasks are in `tasks`.
pub async fn run_tasks<T: Target>(
    target: Arc<T>,
    agent: Arc<Agent>,
    vocab: usize,
    plan: UnitPlan,
) -> (LevelRun, Vec<TaskRecord>) {
    let clock = target.clock();
    let total = (plan.warmup + plan.units) as u64;
    let calls = agent.model_calls() as u64;
    let records = Arc::new(Mutex::new(Vec::new()));
    let tasks_out = Arc::new(Mutex::new(Vec::new()));
    let next = Arc::new(AtomicU64::new(0));
    let start = clock.now();
    let mut sys_rng = rand::rngs::SmallRng::seed_from_u64(plan.seed ^ 0xA6E7);
    let system: Arc<Vec<TokenId>> = Arc::new(random_tokens(&mut sys_rng, agent.system, vocab));
    let plan = Arc::new(plan);
    let mut handles = Vec::new();
    for _ in 0..plan.users.max(1) {
        let (target, agent, plan, next, records, tasks_out, system) = (
            target.clone(),
            agent.clone(),
            plan.clone(),
            next.clone(),
            records.clone(),
            tasks_out.clone(),
            system.clone(),
        );
        handles.push(tokio::spawn(async move {
            loop {
                let t = next.fetch_add(1, Ordering::Relaxed);
                if t >= total {
                    break;
                }
                let task = plan.first_id / calls.max(1) + t;
                let mut rng = rand::rngs::SmallRng::seed_from_u64(plan.seed ^ task.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let mut context: Vec<TokenId> = system.to_vec();
                let n_q = agent.question.sample(&mut rng);
                context.extend(random_tokens(&mut rng, n_q, vocab));
                let task_start = target.clock().now();
                let mut steps = Vec::with_capacity(agent.steps.len());
                let mut ok = true;
                let mut call = 0u64;
                for step in &agent.steps {
                    let s0 = target.clock().now();
                    match step {
                        AgentStep::Llm { output } => {
                            let id = plan.first_id + t * calls + call;
                            call += 1;
                            let n_out = output.sample(&mut rng);
                            let req = WorkRequest {
                                id,
                                prompt: context.clone(),
                                params: SamplingParams::greedy_exact(n_out),
                            };
                            let mut rec = send(&*target, req, s0, plan.timeout).await;
                            rec.session = Some(task);
                            rec.turn = Some(call as u32);
                            ok &= rec.is_ok();
                            context.extend(std::mem::take(&mut rec.output_ids));
                            records.lock().expect("records lock").push(rec);
                        }
                        AgentStep::Tool { latency_ms, result_tokens: n }
                        | AgentStep::Retrieve { latency_ms, tokens: n } => {
                            let wait = latency_ms.sample(&mut rng) as u64;
                            let n = n.sample(&mut rng);
                            tokio::time::sleep(Duration::from_millis(wait)).await;
                            context.extend(random_tokens(&mut rng, n, vocab));
                        }
                    }
                    steps.push(TaskStep { kind: step.kind().into(), start: s0, end: target.clock().now() });
                    if !ok {
                        break;
                    }
                }
                let rec = TaskRecord { task, start: task_start, end: target.clock().now(), steps, ok };
                tasks_out.lock().expect("tasks lock").push(rec);
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    let end = clock.now();
    let records = std::mem::take(&mut *records.lock().expect("records lock"));
    let mut tasks = std::mem::take(&mut *tasks_out.lock().expect("tasks lock"));
    let first_task = plan.first_id / calls.max(1) + plan.warmup as u64;
    tasks.retain(|t| t.task >= first_task);
    (LevelRun { records, measured_from: plan.first_id + plan.warmup as u64 * calls, start, end }, tasks)
}
