//! The engine's state machines as plain structs: the paged KV block pool and the
//! continuous-batching scheduler. No candle, no threads: tests drive them directly with a fake
//! model runner (TGI `backends/v3` style).

pub mod block_pool;
pub mod block_table;
pub mod config;
pub mod scheduler;
pub mod seq_blocks;

pub use block_pool::{BlockHash, BlockId, BlockPool, BrokenInvariant, PoolError};
pub use block_table::{BlockTable, SharedPool};
pub use config::{AdmissionError, ConfigError, SchedulerConfig};
pub use scheduler::{NewRequest, ScheduledSeq, Scheduler, SchedulerOutput, StepUpdate};
pub use seq_blocks::SeqBlocks;
