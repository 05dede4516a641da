//! Why a profile, a GPU entry or a simulator's settings cannot be used. The sizing crate's
//! checks return it, typed; its readers (`ProfileError` of `profile`,
//! `HardwareError` of `hardware`) wrap it with the file it came from. A leaf: it imports
//! nothing of the crate.

/// A sizing input that fails its checks; the message names the field or the term.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SizingError {
    #[error("the fit has no measured term with a positive coefficient")]
    NoMeasuredTerm,
    #[error("coefficient of `{term}` is {value} (must be finite and ≥ 0)")]
    Coefficient { term: String, value: f64 },
    #[error("`{term}`: a table's knots start at 1")]
    KnotAtZero { term: String },
    #[error("`{term}` appears twice")]
    TermTwice { term: String },
    #[error("gap_s is {0} (must be finite and ≥ 0)")]
    Gap(f64),
    #[error("engine settings: block size, batched tokens and sequences must be positive, blocks ≥ 2")]
    EngineSettings,
    /// A calibration asked of a profile written with `--no-roofline`.
    #[error("the profile has no roofline (profile again without --no-roofline)")]
    NoRoofline,
    /// A calibration needs a ratio the profile did not measure; `what` names the steps.
    #[error("the profile did not measure {what}")]
    NotMeasured { what: &'static str },
    #[error("the name must be lowercase, without spaces (`--gpu` looks names up in lowercase)")]
    GpuName,
    #[error("field `{field}` must not be empty")]
    EmptyField { field: &'static str },
    #[error("field `{field}` must be a positive finite number, got {value}")]
    NotPositive { field: &'static str, value: f64 },
    /// A GPU entry that does not deserialize; the message names the field where it can.
    #[error("{0}")]
    Entry(String),
    /// The simulator's scheduler refused its settings.
    #[error(transparent)]
    Scheduler(#[from] goodput_scheduler::ConfigError),
    /// The simulator's KV block pool refused its settings.
    #[error(transparent)]
    Pool(#[from] goodput_scheduler::PoolError),
}
