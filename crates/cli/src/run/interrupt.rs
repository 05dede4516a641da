//! Ctrl-C (SIGINT) and SIGTERM during `goodput run`: the first stops sending, lets requests in
//! flight finish for [`super::level::INTERRUPT_GRACE`], writes what the run has (the current
//! level marked partial, the summary marked incomplete) and exits 130; a second quits at
//! once (records already finished are on disk).

use goodput_workload::Stop;

/// Listens for the signals on `rt` for as long as the runtime lives; raises the returned
/// [`Stop`] on the first.
pub fn install(rt: &tokio::runtime::Runtime) -> Stop {
    let stop = Stop::default();
    let raised = stop.clone();
    rt.spawn(async move {
        crate::serve::signal().await;
        eprintln!(
            "\ngoodput run: interrupted: sending nothing more; requests in flight get {:?} to finish (interrupt again to quit now)",
            super::level::INTERRUPT_GRACE
        );
        raised.raise();
        crate::serve::signal().await;
        eprintln!("goodput run: interrupted again: quitting; every request that had finished is in records.jsonl");
        std::process::exit(130);
    });
    stop
}
