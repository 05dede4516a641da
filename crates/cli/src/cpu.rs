//! CPU time of the harness itself. The load generator runs on the calling thread (a
//! current-thread tokio runtime) while the engine computes on its own threads, so the calling
//! thread's CPU time is the harness's own cost: load generation, stamping and bookkeeping.

/// CPU seconds used so far by the calling thread.
pub fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_THREAD_CPUTIME_ID is always available on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// User and kernel CPU seconds used so far by the calling thread (`RUSAGE_THREAD`, Linux):
/// what the thread computed itself, and what the kernel did for it (its syscalls, and on
/// loopback the receive path of what it sends); NaN elsewhere.
pub fn thread_user_kernel_secs() -> (f64, f64) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: an all-zero rusage is a valid value to be overwritten.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid out-pointer.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0 {
            let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
            return (t(ru.ru_utime), t(ru.ru_stime));
        }
    }
    (f64::NAN, f64::NAN)
}

/// CPU seconds used so far by the whole process (every thread, user + system).
pub fn process_cpu_secs() -> f64 {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return f64::NAN;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

pub use goodput_results::CpuUse;

/// Measures the CPU that `f` makes the calling thread and the process use.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, CpuUse) {
    let (t0, p0, w0) = (thread_cpu_secs(), process_cpu_secs(), std::time::Instant::now());
    let r = f();
    let wall_s = w0.elapsed().as_secs_f64();
    (r, CpuUse { harness_s: thread_cpu_secs() - t0, process_s: process_cpu_secs() - p0, wall_s })
}

#[cfg(test)]
mod tests {
    /// Busy until the thread has used 50 ms of CPU (however long a loaded machine takes to
    /// give it, at most 10 s): the thread and the process both count it, and the share of the
    /// wall time is a fraction.
    #[test]
    fn busy_work_shows_up_on_the_thread_and_the_process() {
        let (_, cpu) = super::measure(|| {
            let (t, c0) = (std::time::Instant::now(), super::thread_cpu_secs());
            let mut x = 0u64;
            while super::thread_cpu_secs() - c0 < 0.05 && t.elapsed().as_secs() < 10 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            x
        });
        assert!(cpu.harness_s >= 0.05, "{cpu:?}");
        assert!(cpu.process_s >= cpu.harness_s * 0.9, "{cpu:?}");
        assert!(cpu.share() > 0.0 && cpu.share() <= 1.2, "{cpu:?}");
    }
}
