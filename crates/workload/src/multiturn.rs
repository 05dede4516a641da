//! Multi-turn chat sessions: every turn re-sends the whole history (system prompt, earlier
//! questions and the answers the target gave), so context grows turn by turn and the prefix
//! cache can serve the part already seen. The system prompt is shared by all sessions, as in
//! a deployed assistant.

use crate::drive::{send, Collector};
use crate::level::{LevelRun, UnitPlan};
use crate::scenario::{random_tokens, LengthDist};
use crate::users::{closed_loop, Users};
use goodput_core::{SamplingParams, Target, TokenId, WorkRequest};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// A multi-turn chat: `turns` questions per session, each answered before the next.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiTurn {
    /// Turns per session (model calls).
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

    /// The longest history the last turn can reach (saturating: a file's lengths may be
    /// anything, and an overflow must not pass as a short context).
    pub fn max_context(&self) -> usize {
        let per_turn = self.user.max().saturating_add(self.output.max());
        self.system.saturating_add((self.turns as usize).saturating_mul(per_turn))
    }

    /// Checks the sessions against the model's context before anything runs.
    /// Whether the sessions fit a model of `max_model_len` positions.
    pub fn validate(&self, max_model_len: usize) -> Result<(), crate::WorkloadError> {
        Ok(self.check(max_model_len)?)
    }

    fn check(&self, max_model_len: usize) -> Result<(), crate::Invalid> {
        let bad = |problem: String| Err(crate::Invalid::new("multi-turn", problem));
        if self.turns == 0 {
            return bad("turns must be at least 1".into());
        }
        if self.think_ms > crate::scenario::MAX_LATENCY_MS as u64 {
            return bad(format!(
                "think_ms is {}; at most {} ms (an hour)",
                self.think_ms,
                crate::scenario::MAX_LATENCY_MS
            ));
        }
        self.user.validate("multi-turn user messages")?;
        self.output.validate("multi-turn answers")?;
        if self.max_context() > max_model_len {
            return bad(format!(
                "{} turns can reach {} tokens of history, beyond the model's context of {max_model_len}",
                self.turns,
                self.max_context()
            ));
        }
        Ok(())
    }

    /// One line for reports: `multi-turn: 4 turns, system prompt 64, …`.
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

/// What every session of a level needs.
struct Sessions<T> {
    target: Arc<T>,
    mt: Arc<MultiTurn>,
    vocab: usize,
    plan: UnitPlan,
    /// The system prompt every session starts with.
    system: Vec<TokenId>,
    collector: Collector,
}

impl<T: Target> Sessions<T> {
    /// Session number `s` of the level: its turns one after another, until one fails.
    async fn session(self: Arc<Self>, s: u64) {
        let (mt, plan) = (&self.mt, &self.plan);
        let turns = mt.turns as u64;
        let session = plan.first_id / turns.max(1) + s;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(plan.seed ^ session.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut history = self.system.clone();
        for turn in 1..=mt.turns {
            let n_user = mt.user.sample(&mut rng);
            let n_out = mt.output.sample(&mut rng);
            history.extend(random_tokens(&mut rng, n_user, self.vocab));
            let id = plan.first_id + s * turns + (turn as u64 - 1);
            let req = WorkRequest {
                session: Some(session),
                id,
                prompt: history.clone(),
                params: SamplingParams::greedy_exact(n_out),
            };
            let intended = self.target.clock().now();
            let mut rec = send(&*self.target, req, intended, plan.timeout, plan.retry).await;
            rec.session = Some(session);
            rec.turn = Some(turn);
            let ok = rec.is_ok();
            // The answer becomes history; the ids are not kept in the record twice.
            history.extend(std::mem::take(&mut rec.output_ids));
            self.collector.push(rec);
            if !ok || plan.stop.raised() {
                break;
            }
            if mt.think_ms > 0 && turn < mt.turns {
                tokio::time::sleep(Duration::from_millis(mt.think_ms)).await;
            }
        }
    }
}

/// Runs `plan.warmup + plan.units + plan.cooldown` sessions over `plan.users` closed-loop
/// users. Each turn is a record (session and 1-based turn set); a failed turn ends its
/// session.
pub async fn run_sessions<T: Target>(target: Arc<T>, mt: Arc<MultiTurn>, vocab: usize, plan: UnitPlan) -> LevelRun {
    let clock = target.clock();
    let start = clock.now();
    let window = plan.window(mt.turns as u64, start);
    let mut sys_rng = rand::rngs::SmallRng::seed_from_u64(plan.seed ^ 0x5757);
    let system = random_tokens(&mut sys_rng, mt.system, vocab);
    let collector = Collector::new(window, false, &plan).closed(mt.turns as u64);
    let users = Users::of(&plan, None);
    let sessions = Arc::new(Sessions { target, mt, vocab, plan, system, collector });
    let s = sessions.clone();
    let started = closed_loop(users, sessions.clone(), move |w| s.collector.warmed(w), Sessions::session).await;
    let mut run = sessions.collector.finish(start, clock.now(), |_| window).0;
    run.ramp = Some(started.ramp);
    run
}
