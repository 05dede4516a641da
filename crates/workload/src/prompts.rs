//! Where a level's single requests come from: the one trait the runner of single requests
//! asks, implemented beside each source (a scenario's synthetic prompts, a dataset's, a
//! trace's). A leaf: it imports no other module of the crate.

use goodput_core::WorkRequest;

/// Where a level's single requests come from: a scenario's synthetic prompts, a dataset's or
/// a trace's.
pub trait Prompts: Send + Sync + 'static {
    /// Request `id` (the `index`-th of its level) of a run seeded with `seed`, prompts drawn
    /// from `vocab` ids.
    fn request(&self, seed: u64, id: u64, index: u64, vocab: usize) -> WorkRequest;

    /// Seconds from the level's start at which its `index`-th request is due at `speedup`,
    /// for prompts with times of their own (a trace).
    fn due(&self, _index: u64, _speedup: f64) -> Option<f64> {
        None
    }

    /// For prompts of sessions (a trace's): request `index`'s session and its turn (1 first).
    fn turn(&self, _index: u64) -> Option<(u64, u32)> {
        None
    }

    /// For prompts of sessions: the session's turn after request `index`, and when it is due
    /// (at speed 1), once `index` has ended.
    fn next_turn(&self, _index: u64) -> Option<(u64, NextDue)> {
        None
    }

    /// Whether request `index` is sent by another request's chain (a session's later turn, a
    /// subagent's first), not at its own time.
    fn follows(&self, _index: u64) -> bool {
        false
    }

    /// The subagents request `index` calls once it has ended: their first turns, each with its
    /// delay in seconds (at speed 1); the session's next turn waits for them all.
    fn calls(&self, _index: u64) -> Vec<(u64, f64)> {
        Vec::new()
    }
}

/// When a session's next turn is due, once the turn before it has ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NextDue {
    /// This many seconds after it ended (a tool's or a user's wait).
    After(f64),
    /// At this time from the level's start (its own time in the trace), or at once if past.
    At(f64),
}
