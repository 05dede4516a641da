//! Which load-generator worker the calling thread is, if any: set once by the worker pool
//! (`goodput_workload::pool`) on each of its threads, read by targets that keep per-thread
//! state (the HTTP client gives each worker its own connection pool, so a connection is read
//! by the runtime that opened it).

use std::cell::Cell;

thread_local! {
    static WORKER: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The calling thread's worker number, or `None` off the pool.
pub fn current() -> Option<usize> {
    WORKER.with(Cell::get)
}

/// Marks the calling thread as worker `i` (the pool does, as each of its threads starts).
pub fn set(i: usize) {
    WORKER.with(|w| w.set(Some(i)));
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_thread_has_its_own_number() {
        assert_eq!(super::current(), None);
        super::set(3);
        assert_eq!(super::current(), Some(3));
        assert_eq!(std::thread::spawn(super::current).join().unwrap(), None);
    }
}
