//! Multi-turn chat sessions: every turn re-sends the whole history (system prompt, earlier
//! questions and the answers the target gave), so context grows turn by turn and the prefix
//! cache can serve the part already seen. The system prompt is shared by all sessions, as in
//! a deployed assistant.

use crate::runner::{send, LevelRun, UnitPlan};
use crate::scenario::{random_tokens, LengthDist};
use goodput_core::{SamplingParams, Target, TokenId, WorkRequest};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MultiTurn {
    pub turns: u32,
    /// Tokens of the system prompt every session starts with.
    pub system: usize,
    /// Tokens of each user message.
    pub user: LengthDist,
    /// Tokens of each answer.
    pub output: LengthDist,
    /// Pause between an answer and the next question.
    #[serde(default)]
    pub think_ms: u64,
}

impl MultiTurn {
    /// The built-in `multi-turn` scenario: 4 turns, a 64-token system prompt, short questions.
    pub fn builtin() -> Self {
        MultiTurn {
            turns: 4,
            system: 64,
            user: LengthDist::Uniform { min: 30, max: 80 },
            output: LengthDist::Uniform { min: 40, max: 80 },
            think_ms: 0,
        }
    }

    /// The longest history the last turn can reach.
    pub fn max_context(&self) -> usize {
        self.system + self.turns as usize * (self.user.max() + self.output.max())
    }

    pub fn validate(&self, max_model_len: usize) -> Result<(), String> {
        if self.turns == 0 {
            return Err("multi-turn: turns must be at least 1".into());
        }
        self.user.validate("multi-turn user messages")?;
        self.output.validate("multi-turn answers")?;
        if self.max_context() > max_model_len {
            return Err(format!(
                "multi-turn: {} turns can reach {} tokens of history, beyond the model's context of {max_model_len}",
                self.turns,
                self.max_context()
            ));
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        format!(
            "multi-turn: {} turns, system prompt {}, user messages {}, answers {} tokens, think {} ms",
            self.turns,
            self.system,
            self.user.describe(),
            self.output.describe(),
            self.think_ms
        )
    }
}

/// Runs `plan.warmup + plan.units` sessions over `plan.users` closed-loop users.
pub async fn run_sessions<T: Target>(target: Arc<T>, mt: Arc<MultiTurn>, vocab: usize, plan: UnitPlan) -> LevelRun {
    let clock = target.clock();
    let total = (plan.warmup + plan.units + plan.cooldown) as u64;
    let turns = mt.turns as u64;
    let records = Arc::new(Mutex::new(Vec::new()));
    let next = Arc::new(AtomicU64::new(0));
    let start = clock.now();
    let mut sys_rng = rand::rngs::SmallRng::seed_from_u64(plan.seed ^ 0x5757);
    let system: Arc<Vec<TokenId>> = Arc::new(random_tokens(&mut sys_rng, mt.system, vocab));
    let plan = Arc::new(plan);
    let mut tasks = Vec::new();
    for _ in 0..plan.users.max(1) {
        let (target, mt, plan, next, records, system) =
            (target.clone(), mt.clone(), plan.clone(), next.clone(), records.clone(), system.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let s = next.fetch_add(1, Ordering::Relaxed);
                if s >= total {
                    break;
                }
                let session = plan.first_id / turns.max(1) + s;
                let mut rng =
                    rand::rngs::SmallRng::seed_from_u64(plan.seed ^ session.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let mut history: Vec<TokenId> = system.to_vec();
                for turn in 1..=mt.turns {
                    let n_user = mt.user.sample(&mut rng);
                    let n_out = mt.output.sample(&mut rng);
                    history.extend(random_tokens(&mut rng, n_user, vocab));
                    let id = plan.first_id + s * turns + (turn as u64 - 1);
                    let req = WorkRequest { id, prompt: history.clone(), params: SamplingParams::greedy_exact(n_out) };
                    let intended = target.clock().now();
                    let mut rec = send(&*target, req, intended, plan.timeout, plan.retry).await;
                    rec.session = Some(session);
                    rec.turn = Some(turn);
                    let ok = rec.is_ok();
                    // The answer becomes history; the ids are not kept in the record twice.
                    history.extend(std::mem::take(&mut rec.output_ids));
                    records.lock().expect("records lock").push(rec);
                    if !ok {
                        break;
                    }
                    if mt.think_ms > 0 && turn < mt.turns {
                        tokio::time::sleep(Duration::from_millis(mt.think_ms)).await;
                    }
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let end = clock.now();
    let records = std::mem::take(&mut *records.lock().expect("records lock"));
    LevelRun::of_units(records, &plan, turns, start, end)
}
