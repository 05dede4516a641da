//! Workloads: scenarios (lengths and prompts), arrival processes, and the runner that drives
//! any [`goodput_core::Target`] through one load level at a time.

pub mod agent;
pub mod file;
pub mod multiturn;
pub mod rag;
pub mod runner;
pub mod scenario;

pub use agent::{run_tasks, Agent, AgentNode, AgentStep};
pub use file::{load_scenario, ScenarioFile};
pub use multiturn::{run_sessions, MultiTurn};
pub use rag::{run_rag, Embedder, HashEmbedder, Rag, RagIndex, RagSetup, TextTokenizer};
pub use runner::{run_level, Arrival, LevelPlan, LevelRun, Phase, RetryPolicy, Trim, UnitPlan, Window};
pub use scenario::{LengthDist, Scenario};
