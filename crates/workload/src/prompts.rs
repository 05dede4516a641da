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
}
