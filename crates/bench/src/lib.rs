//! The goodput benchmark as a library: a checked run description ([`RunSpec`]) in, typed
//! results ([`goodput_results::RunSummary`] and the run's files) out. Here: the rig that sets
//! up a target (the in-process engine, goodput's own server on loopback, any server's URL,
//! or the simulated engine), the sweep of load levels with its capacity search, refinement
//! and soak, each level's run and its three layers of numbers, the spread of repeats, the
//! runs `compare` reads, and what surrounds a run (the harness's CPU time, the open-file
//! limit, a reference clock, a live-metrics exporter). Progress goes out as events through
//! [`progress::Progress`]; files are written through `goodput-results`, text through
//! `goodput-report`.
//!
//! Between `goodput-client` (and every crate below it) and the command line: it imports no
//! command-line parsing, and nothing here may be imported by a crate below it.

pub mod accuracy;
pub mod calibrate;
pub mod check;
pub mod clockref;
pub mod command;
pub mod compare;
pub mod config;
pub mod cpu;
pub mod fds;
pub mod gpu;
pub mod launch;
pub mod matrix;
pub mod merge;
pub mod profile;
pub mod progress;
pub mod repeats;
pub mod run;
pub mod runs;
pub mod simulate;
pub mod target;
pub mod workload;

pub use run::spec::RunSpec;
