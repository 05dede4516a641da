//! Ctrl-C (SIGINT) and SIGTERM during `goodput run`: the first stops sending, lets requests in
//! flight finish for [`super::level::INTERRUPT_GRACE`], writes what the run has (the current
//! level marked partial, the summary marked incomplete) and exits 130. Two things end it
//! sooner: a second signal quits at once, and a run still going [`QUIT_AFTER`] after the
//! first (a stuck request or scrape, a server that never answers) quits then. Either way it
//! exits 130 and keeps what was written: every request that had finished is in
//! `records.jsonl`, the summary as of the last finished level.
//!
//! The signals are watched on a thread of their own, so a load generator's thread that is
//! busy or blocked cannot keep them from being seen.

use goodput_workload::Stop;
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// How long after the first signal the run may take to end by itself: the grace of the
/// requests in flight, then time to stop the local server and write the level, the summary
/// and the report.
pub const QUIT_AFTER: Duration = Duration::from_secs(super::level::INTERRUPT_GRACE.as_secs() + 10);

/// Watches for the signals for as long as the process lives; raises the returned [`Stop`] on
/// the first. The handlers are registered before this returns (a signal the moment after is
/// seen, not taken by its default, which ends the process); they are then watched on a thread
/// of their own. Without a runtime or a thread for them the signals keep their default: the
/// first ends the process.
pub fn install() -> Stop {
    let stop = Stop::default();
    if let Err(e) = try_install(stop.clone()) {
        eprintln!("warning: no handling of Ctrl-C ({e}): an interrupt ends the run at once");
    }
    stop
}

fn try_install(raised: Stop) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let signals = {
        let _in_rt = rt.enter();
        (signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?)
    };
    std::thread::Builder::new().name("goodput-interrupt".into()).spawn(move || rt.block_on(watch(signals, raised)))?;
    Ok(())
}

/// Resolves at the next SIGINT or SIGTERM.
async fn next((int, term): &mut (Signal, Signal)) {
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}

async fn watch(mut signals: (Signal, Signal), raised: Stop) {
    next(&mut signals).await;
    eprintln!(
        "\ngoodput run: interrupted: sending nothing more; requests in flight get {:?} to finish, and goodput \
         quits at the latest {:?} from now (interrupt again to quit now)",
        super::level::INTERRUPT_GRACE,
        QUIT_AFTER
    );
    raised.raise();
    tokio::select! {
        _ = next(&mut signals) => {
            eprintln!("goodput run: interrupted again: quitting; every request that had finished is in records.jsonl");
        }
        _ = tokio::time::sleep(QUIT_AFTER) => {
            eprintln!(
                "goodput run: still not done {QUIT_AFTER:?} after the interrupt (a request or a /metrics scrape is \
                 stuck): quitting; every request that had finished is in records.jsonl"
            );
        }
    }
    crate::launch::kill_all();
    std::process::exit(super::EXIT_INTERRUPTED);
}
