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

/// The calling thread's kernel id (Linux), for [`task_user_kernel_secs`] from another thread.
pub fn current_tid() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions.
        Some(unsafe { libc::gettid() })
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// User and kernel CPU seconds used so far by thread `tid` of this process, from
/// `/proc/self/task/TID/stat` (fields 14 and 15, in clock ticks); NaN when unreadable.
pub fn task_user_kernel_secs(tid: i32) -> (f64, f64) {
    let read = || -> Option<(f64, f64)> {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
        // The command name may hold spaces: the fields count from after its closing paren.
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the paren.
        Some((ticks(11)? / hz, ticks(12)? / hz))
    };
    read().unwrap_or((f64::NAN, f64::NAN))
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

use goodput_metrics::machine::{CpuCounters, MachineLoad};

/// The machine's CPU counters now (`/proc/stat`, `/proc/loadavg`, this process's CPU time);
/// `None` where there is no `/proc` (not Linux).
pub fn counters() -> Option<CpuCounters> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let (busy_ticks, steal_ticks, all_ticks) = CpuCounters::parse_stat(&stat)?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    Some(CpuCounters {
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        busy_ticks,
        steal_ticks,
        all_ticks,
        own_cpu_s: process_cpu_secs(),
        load_avg_1m: load.split_whitespace().next().and_then(|x| x.parse().ok()).unwrap_or(f64::NAN),
    })
}

/// Seconds per tick of `/proc/stat` (`_SC_CLK_TCK`, 100 per second almost everywhere).
fn tick_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        1.0 / hz as f64
    } else {
        0.01
    }
}

/// The speed probe: the best of three timings of a fixed single-thread computation (some
/// 4 ms on a current core), in seconds.
pub fn probe_s() -> f64 {
    (0..3)
        .map(|_| {
            let t = std::time::Instant::now();
            let mut x = 1u64;
            for i in 0..4_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
            }
            std::hint::black_box(x);
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Runs `f` with the machine watched: its counters and the speed probe before and after.
/// `target_here`: the target is another process on this machine (its CPU is not others').
pub fn watched<R>(target_here: bool, f: impl FnOnce() -> R) -> (R, Option<MachineLoad>) {
    let (probe0, c0, t0) = (probe_s(), counters(), std::time::Instant::now());
    let r = f();
    let (wall, c1) = (t0.elapsed().as_secs_f64(), counters());
    let probe1 = probe_s();
    let load = c0.zip(c1).map(|(a, b)| MachineLoad {
        probe_drift: (probe0 > 0.0).then(|| probe1 / probe0 - 1.0),
        includes_target: target_here,
        ..MachineLoad::between(&a, &b, tick_s(), wall)
    });
    (r, load)
}

/// The load generator's threads beside the calling one: its worker pool's
/// (`goodput_workload::pool`), whose CPU is the harness's too.
#[cfg(unix)]
pub type Threads = [std::os::unix::thread::RawPthread];
#[cfg(not(unix))]
pub type Threads = [()];

/// CPU seconds used so far by each of `threads` (NaN where a clock cannot be read).
fn threads_cpu_secs(threads: &Threads) -> Vec<f64> {
    #[cfg(target_os = "linux")]
    {
        threads
            .iter()
            .map(|&t| {
                let mut id: libc::clockid_t = 0;
                let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                // SAFETY: `t` is a thread of a pool that outlives this call (its JoinHandle is
                // held); `id` and `ts` are valid out-pointers.
                let ok = unsafe {
                    libc::pthread_getcpuclockid(t as libc::pthread_t, &mut id) == 0
                        && libc::clock_gettime(id, &mut ts) == 0
                };
                if ok {
                    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
                } else {
                    f64::NAN
                }
            })
            .collect()
    }
    #[cfg(not(target_os = "linux"))]
    {
        vec![f64::NAN; threads.len()]
    }
}

/// Measures the CPU that `f` makes the calling thread and `workers` (the harness) and the
/// process use, and the busiest of those threads.
pub fn measure_with<R>(workers: &Threads, f: impl FnOnce() -> R) -> (R, CpuUse) {
    let each = || std::iter::once(thread_cpu_secs()).chain(threads_cpu_secs(workers)).collect::<Vec<f64>>();
    let (t0, p0, w0) = (each(), process_cpu_secs(), std::time::Instant::now());
    let r = f();
    let wall_s = w0.elapsed().as_secs_f64();
    let used: Vec<f64> = each().iter().zip(&t0).map(|(b, a)| b - a).collect();
    let threads = if workers.is_empty() { 1 } else { workers.len() };
    let cpu = CpuUse {
        harness_s: used.iter().sum(),
        process_s: process_cpu_secs() - p0,
        wall_s,
        threads,
        busiest_s: used.iter().copied().fold(f64::NAN, f64::max),
    };
    (r, cpu)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_machine_s_counters_read_and_a_quiet_wait_uses_no_core_of_ours() {
        let Some(c) = super::counters() else { return };
        assert!(c.cpus >= 1 && c.all_ticks >= c.busy_ticks, "{c:?}");
        let (_, load) = super::watched(false, || std::thread::sleep(std::time::Duration::from_millis(50)));
        let load = load.unwrap();
        assert!(load.other_cores >= 0.0 && load.probe_drift.is_some(), "{load:?}");
        assert!(super::probe_s() > 0.0);
    }

    /// Busy until the thread has used 50 ms of CPU (however long a loaded machine takes to
    /// give it, at most 10 s): the thread and the process both count it, and the share of the
    /// wall time is a fraction.
    #[test]
    fn busy_work_shows_up_on_the_thread_and_the_process() {
        let (_, cpu) = super::measure_with(&[], || {
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
        assert_eq!(cpu.busiest_s, cpu.harness_s, "one thread: the busiest is all of it");
    }
}
