//! Workloads: scenarios (lengths and prompts), arrival processes, and the runner that drives
//! any [`goodput_core::Target`] through one load level at a time.

pub mod agent;
pub mod multiturn;
pub mod rag;
pub mod runner;
pub mod scenario;

pub use agent::{run_tasks, Agent, AgentStep, TaskPlan};
pub use multiturn::{run_sessions, MultiTurn, SessionPlan};
pub use rag::{run_rag, Embedder, Rag, RagIndex, RagPlan, RagSetup, TextTokenizer};
pub use runner::{run_level, Arrival, LevelPlan, LevelRun};
pub use scenario::{LengthDist, Scenario};
