//! The load generator on many cores: a pool of worker threads, each running a current-thread
//! tokio runtime of its own, over which a level's requests (an open loop's arrivals, a burst)
//! and a closed loop's users are spread, one after the other in turn. The schedule stays one:
//! the level's driver computes every intended send time on its own thread and hands each
//! request to a worker at its time, so open-loop arrivals and closed-loop users mean what they
//! mean with one thread; each request then runs (sends, reads its stream, stamps its chunks)
//! on its worker, whose runtime reads that worker's connections only.
//!
//! The pool is entered on the driver's thread for the time of a level ([`Workers::enter`]);
//! a level run outside it spawns on the current runtime, as before.

use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

thread_local! {
    static ENTERED: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
}

struct Shared {
    handles: Vec<Handle>,
    next: AtomicUsize,
}

/// A pool of load-generator workers; stopped (its threads joined) when dropped.
pub struct Workers {
    shared: Arc<Shared>,
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// Why the pool could not start.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("a worker pool needs at least one worker")]
    Empty,
    #[error("starting load-generator worker {worker}: {source}")]
    Start { worker: usize, source: std::io::Error },
}

impl Workers {
    /// Starts `n` workers, named `goodput-load-K`; `on_start(K)` runs first on worker K's
    /// thread (to pin it).
    pub fn start(n: usize, on_start: impl Fn(usize) + Send + Sync + 'static) -> Result<Workers, PoolError> {
        if n == 0 {
            return Err(PoolError::Empty);
        }
        let on_start = Arc::new(on_start);
        let (mut handles, mut stops, mut threads) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..n {
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let on_start = on_start.clone();
            let thread = std::thread::Builder::new()
                .name(format!("goodput-load-{k}"))
                .spawn(move || {
                    goodput_core::worker::set(k);
                    on_start(k);
                    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                        Ok(rt) => rt,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(rt.handle().clone()));
                    rt.block_on(async move {
                        let _ = stop_rx.await;
                    });
                })
                .map_err(|source| PoolError::Start { worker: k, source })?;
            let handle = ready_rx
                .recv()
                .map_err(|_| std::io::Error::other("the worker thread ended before its runtime started"))
                .and_then(|r| r)
                .map_err(|source| PoolError::Start { worker: k, source })?;
            handles.push(handle);
            stops.push(stop_tx);
            threads.push(thread);
        }
        Ok(Workers { shared: Arc::new(Shared { handles, next: AtomicUsize::new(0) }), stops, threads })
    }

    /// How many workers.
    pub fn len(&self) -> usize {
        self.shared.handles.len()
    }

    /// Never true: a pool has a worker at least.
    pub fn is_empty(&self) -> bool {
        self.shared.handles.is_empty()
    }

    /// The workers' threads, for reading their CPU clocks (`pthread_getcpuclockid`).
    #[cfg(unix)]
    pub fn pthreads(&self) -> Vec<std::os::unix::thread::RawPthread> {
        use std::os::unix::thread::JoinHandleExt;
        self.threads.iter().map(|t| t.as_pthread_t()).collect()
    }

    /// Spreads the spawns of the calling thread over the pool until the guard is dropped.
    pub fn enter(&self) -> Entered {
        let previous = ENTERED.with(|e| e.borrow_mut().replace(self.shared.clone()));
        Entered { previous }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for s in self.stops.drain(..) {
            let _ = s.send(());
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The calling thread spawns on the pool while this lives.
pub struct Entered {
    previous: Option<Arc<Shared>>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        ENTERED.with(|e| *e.borrow_mut() = previous);
    }
}

/// Spawns `f` on the next worker of the pool the calling thread entered, else on the current
/// runtime (`tokio::spawn`).
pub fn spawn<F>(f: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let pool = ENTERED.with(|e| e.borrow().clone());
    match pool {
        Some(p) => {
            let k = p.next.fetch_add(1, Ordering::Relaxed) % p.handles.len();
            p.handles[k].spawn(f)
        }
        None => tokio::spawn(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawns_go_round_the_workers_and_only_while_entered() {
        let started = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = started.clone();
        let pool = Workers::start(3, move |k| seen.lock().unwrap().push(k)).unwrap();
        let mut started_on = started.lock().unwrap().clone();
        started_on.sort();
        assert_eq!(started_on, [0, 1, 2], "on_start ran on every worker");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let on = |n: usize| {
            rt.block_on(async {
                let tasks: Vec<_> = (0..n).map(|_| spawn(async { goodput_core::worker::current() })).collect();
                let mut out = Vec::new();
                for t in tasks {
                    out.push(t.await.unwrap());
                }
                out
            })
        };
        let entered = pool.enter();
        let workers = on(6);
        assert_eq!(workers, [Some(0), Some(1), Some(2), Some(0), Some(1), Some(2)]);
        drop(entered);
        assert_eq!(on(2), [None, None], "outside the pool: the current runtime");
        assert_eq!((pool.len(), pool.is_empty()), (3, false));
        drop(pool);
        assert!(matches!(Workers::start(0, |_| {}), Err(PoolError::Empty)));
    }
}
