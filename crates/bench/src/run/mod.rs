//! One run: the [`rig`] sets up the model, engine and target from the [`spec`], each
//! [`level`] runs and is reported, and the [`sweep`] writes, refines and concludes;
//! [`run`] does it all and returns the [`Outcome`].

pub mod clock;
mod error;
pub mod exporter;
pub mod interrupt;
pub mod level;
pub mod limit;
pub mod live;
pub mod process;
pub mod records;
pub mod rig;
pub mod spec;
pub mod sweep;

pub use error::RunError;
pub use rig::machine;
pub use sweep::Outcome;

use crate::progress::Progress;
use goodput_workload::Stop;
use spec::RunSpec;

/// The exit status of a run whose every level measured a completed request.
pub const EXIT_OK: i32 = 0;
/// A level measured no completed request: its numbers describe failures only.
pub const EXIT_NOTHING_COMPLETED: i32 = 3;
/// Interrupted (SIGINT or SIGTERM): what finished is written, the run marked incomplete.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Runs `spec`: the rig set up, the levels run one by one (each written as it finishes),
/// refinement and search levels added, the soak, then the conclusion and the report written.
/// `stop` (raised by an interrupt, [`interrupt::install`]) ends it early, with what finished
/// written and the summary marked incomplete.
pub fn run(spec: &RunSpec, stop: Stop, progress: &dyn Progress) -> Result<Outcome, RunError> {
    raise_open_files(spec, progress);
    let rig = rig::Rig::build(spec, progress)?;
    let twin = spec
        .target
        .predict()
        .map(|(engine, p)| rig::Rig::simulated(spec, engine, p, Some(rig.tokenizer.clone()), progress))
        .transpose()?;
    let mut sweep = sweep::Sweep::start(spec, &rig, stop.clone(), progress)?;
    if let Some(at) = spec.start_at {
        sweep.wait_for_start(at);
    }
    while !stop.raised() {
        let Some(level) = sweep.next_level() else { break };
        let finished = sweep.run_level(&rig, &level)?;
        if let (Some(twin), false) = (&twin, stop.raised()) {
            sweep.run_twin(twin, &level);
        }
        sweep.finish_level(finished)?;
    }
    if !stop.raised() {
        sweep.run_soak(&rig)?;
    }
    drop(twin);
    drop(rig);
    sweep.finish(stop.raised())
}

/// Raises the open-file limit toward what the largest level's connections need (generously:
/// [`crate::fds::needed`]); when even the hard limit leaves too little room for them beside
/// the files open now, says so once, with the numbers (connections past it fail with EMFILE).
fn raise_open_files(spec: &RunSpec, progress: &dyn Progress) {
    let Some((level, in_flight, bounded, sides)) = spec.connections() else { return };
    let Some(limit) = crate::fds::raise_for(crate::fds::needed(in_flight, sides)) else { return };
    let open = crate::fds::open_now().unwrap_or(crate::fds::MARGIN);
    let room = crate::fds::room(limit.soft, open, sides);
    if room >= in_flight {
        return;
    }
    let what = if bounded {
        format!("{in_flight} requests in flight")
    } else {
        format!(
            "up to {in_flight} requests in flight if they last until their --timeout (--max-concurrency bounds them)"
        )
    };
    let each = if sides == 2 { "a socket on each side" } else { "a socket" };
    progress.line(
        &format!(
            "warning: the open-file limit is {} (hard limit {}, {open} open now), and the level at {} {} may have {what}, each holding {each}: past about {room} in flight new connections fail with \"Too many open files\"; raise the hard limit (`ulimit -Hn`, LimitNOFILE= for a service)",
            limit.soft, limit.hard, level.load, spec.unit
        ),
        true,
    );
}
