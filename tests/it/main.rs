//! The workspace's end-to-end tests, as one test binary: each module drives the `goodput`
//! binary or the engine the way a user would. One binary rather than one per file keeps a
//! clean `cargo test --workspace` small on disk and quick to link. Tests whose figures need
//! the machine to themselves are in `tests/timing`.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod config;
mod console;
mod dashboard;
mod deploy;
mod engine_check;
mod fleet;
mod hostile_servers;
mod launch;
mod lengths;
mod merge;
mod misuse;
mod models;
mod plan_moe;
mod pool;
mod prompts;
mod reliability;
mod repeats;
mod report;
mod results;
mod run;
mod shards;
mod sizing;
mod smollm2_gguf;
mod traces;
mod twin;
mod weights;
