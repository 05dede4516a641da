//! Third-party parsers of outside input (candle's GGUF reader) that may panic on a malformed
//! file: run them under [`quietly`], which turns a panic into an error naming the file's
//! problem, without the panic message on stderr.
//!
//! Written by hand because std offers the two halves (`catch_unwind`, `set_hook`) but no way
//! to silence the default hook for one call: a process-wide hook is installed once, and
//! skips printing on a thread inside [`quietly`].

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

fn install_hook() {
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                default(info);
            }
        }));
    });
}

/// A panic caught by [`quietly`]: its message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Panicked(pub String);

/// Runs `f`; a panic inside it becomes `Err` with the panic's message.
pub fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    install_hook();
    let was = QUIET.with(|q| q.replace(true));
    let out = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    out.map_err(|payload| {
        Panicked(
            payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the reader failed".into()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message_and_the_value_passes_through() {
        assert_eq!(quietly(|| 7), Ok(7));
        let zero = std::hint::black_box(0u64);
        let e = quietly(|| 10 / zero).unwrap_err();
        assert!(e.0.contains("divide by zero"), "{e}");
        assert_eq!(quietly(|| panic!("bad {}", 3)), Err::<(), _>(Panicked("bad 3".into())));
    }
}
