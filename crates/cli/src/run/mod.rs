//! `goodput run`: a scenario through a sweep of load levels against the in-process engine or
//! an HTTP server, with the three layers of numbers per level, SLO checks, usable and limit
//! capacity, the queueing knee, and the written conclusion of the seeds. In steps: the
//! [`args`] are consumed once into a checked [`spec`], the [`rig`] sets up the model, engine
//! and target, each [`level`] runs and is reported, and the [`sweep`] writes, refines and
//! concludes. Only `goodput run` and `goodput capacity` read the arguments; the rig, the sweep
//! and the levels take the spec.

mod args;
mod interrupt;
mod level;
mod live;
mod records;
mod rig;
mod spec;
mod sweep;

pub use args::{CapacityArgs, RunArgs};
pub use rig::machine;

use anyhow::{bail, Result};
use sweep::Sweep;

/// `goodput capacity`: levels 1, 2, 4, … users up to `--max-users`, stopping at the first
/// level whose SLOs break, then `--refine` bisection steps.
pub fn capacity(c: CapacityArgs) -> Result<i32> {
    let mut a = c.run;
    if a.rate.is_some() || a.stages.is_some() || a.duration.is_some() {
        bail!("goodput capacity searches over users with --requests per level; drop --rate, --stages and --duration");
    }
    if a.trace.trace.is_some() {
        bail!("goodput capacity searches over users; a trace sends at its own times: use `run --trace F --trace-speedup 1,2,4`");
    }
    if c.max_users == 0 || c.max_users > spec::MAX_USERS {
        bail!("--max-users must be between 1 and {}, got {}", spec::MAX_USERS, c.max_users);
    }
    a.concurrency =
        std::iter::successors(Some(1usize), |&u| u.checked_mul(2)).take_while(|&u| u <= c.max_users).collect();
    if a.concurrency.last() != Some(&c.max_users) {
        a.concurrency.push(c.max_users);
    }
    a.stop_at_first_failure = true;
    run(a)
}

/// Raises the open-file limit toward what the largest level's connections need (generously:
/// [`crate::fds::needed`]); when even the hard limit leaves too little room for them beside
/// the files open now, says so once, with the numbers (connections past it fail with EMFILE).
fn raise_open_files(spec: &spec::RunSpec) {
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
    eprintln!(
        "warning: the open-file limit is {} (hard limit {}, {open} open now), and the level at {} {} may have {what}, each holding {each}: past about {room} in flight new connections fail with \"Too many open files\"; raise the hard limit (`ulimit -Hn`, LimitNOFILE= for a service)",
        limit.soft, limit.hard, level.load, spec.unit
    );
}

/// `goodput run`'s exit status when every level measured a completed request.
pub const EXIT_OK: i32 = 0;
/// A level measured no completed request: its numbers describe failures only.
pub const EXIT_NOTHING_COMPLETED: i32 = 3;
/// Interrupted (SIGINT or SIGTERM): what finished is written, the run marked incomplete.
pub const EXIT_INTERRUPTED: i32 = 130;

/// `goodput run`: the arguments checked into a spec, the rig set up, the levels run one by one (each written
/// as it finishes), refinement levels added, then the tables, the conclusion and the report.
/// Returns the exit status: [`EXIT_OK`], [`EXIT_NOTHING_COMPLETED`] or [`EXIT_INTERRUPTED`].
pub fn run(a: RunArgs) -> Result<i32> {
    let spec = spec::RunSpec::new(a)?;
    raise_open_files(&spec);
    let rig = rig::Rig::build(&spec)?;
    let twin = spec
        .target
        .predict()
        .map(|(engine, p)| rig::Rig::simulated(&spec, engine, p, Some(rig.tokenizer.clone())))
        .transpose()?;
    let stop = interrupt::install();
    let mut sweep = Sweep::start(&spec, &rig, stop.clone())?;
    while !stop.raised() {
        let Some(level) = sweep.next_level() else { break };
        let finished = sweep.run_level(&rig, &level)?;
        if let (Some(twin), false) = (&twin, stop.raised()) {
            sweep.run_twin(twin, &level);
        }
        sweep.finish_level(finished)?;
    }
    drop(twin);
    drop(rig);
    sweep.finish(stop.raised())
}
