//! Sizing: a step-cost model fitted from the engine's own step records, the simulator that
//! runs the real `goodput-scheduler` in virtual time with that model in place of the model
//! runner, roofline step costs for any (model, GPU, dtype, TP) from the hardware catalog, and
//! the plans built on them. No candle, no tokio: plain data and arithmetic.

pub mod cost;
pub mod error;
pub mod fit;
pub mod fleet;
pub mod hardware;
pub mod layout;
pub mod plan;
pub mod price;
pub mod profile;
pub mod roofline;
pub mod routing;
pub mod sampled;
pub mod sim;
pub mod work;

pub use error::SizingError;
