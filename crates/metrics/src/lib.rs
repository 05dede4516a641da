//! Pure statistics for goodput: every metric and statistic is defined here once, with its
//! definition in a doc comment and hand-computed tests. No I/O, no clocks.

pub mod accuracy;
pub mod agent;
pub mod cache;
pub mod capacity;
pub mod compare;
pub mod engine;
pub mod http;
pub mod input;
pub mod interval;
pub mod level;
pub mod machine;
pub mod names;
pub mod nan;
pub mod occupancy;
pub mod pareto;
pub mod peaks;
pub mod prom;
pub mod request;
pub mod resample;
pub mod saturation;
pub mod server;
pub mod sessions;
pub mod slo;
pub mod soak;
pub mod spread;
pub mod stats;
pub mod steady;
pub mod turns;
pub mod windowed;

pub use stats::{percentile, Summary};
