//! CPU affinity (Linux): pin the engine's threads and the harness's to separate cores, so the
//! load generator's own CPU use does not move the engine's numbers.
//!
//! Threads inherit their creator's affinity, so pinning a thread before it spawns others
//! pins those too. Elsewhere (macOS, the BSDs) threads cannot be pinned: [`allowed`] is every
//! CPU the machine has and [`pin_current`] refuses, naming why.

use crate::error::{PinError, Result};

/// The CPUs the calling thread may run on.
#[cfg(target_os = "linux")]
pub fn allowed() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is the empty set; the pointer and size are of that set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

/// The CPUs the calling thread may run on: without affinity, every CPU of the machine.
#[cfg(not(target_os = "linux"))]
pub fn allowed() -> Vec<usize> {
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

/// Restricts the calling thread to `cpus`: only Linux pins threads.
#[cfg(not(target_os = "linux"))]
pub fn pin_current(cpus: &[usize]) -> Result<()> {
    Err(PinError::NotLinux(cpus.to_vec()).into())
}

/// Restricts the calling thread to `cpus`.
#[cfg(target_os = "linux")]
pub fn pin_current(cpus: &[usize]) -> Result<()> {
    if cpus.is_empty() {
        return Err(PinError::Empty.into());
    }
    // SAFETY: as above; CPU_SET is only given CPUs below CPU_SETSIZE.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c >= libc::CPU_SETSIZE as usize {
                return Err(PinError::Beyond(c).into());
            }
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(PinError::Refused { cpus: cpus.to_vec(), os: std::io::Error::last_os_error() }.into());
    }
    Ok(())
}

/// [`pin_current`] for a thread that has no caller to return an error to (a pool's or a
/// runtime's start handler): a failure is said on stderr, once per `what` and reason, so a
/// benchmark never runs unpinned without saying so. Whether the thread is pinned.
pub fn pin_current_or_warn(cpus: &[usize], what: &str) -> bool {
    match pin_current(cpus) {
        Ok(()) => true,
        Err(e) => {
            static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
            let line = format!(
                "warning: a thread of {what} could not be pinned ({e}): it runs unpinned, and its timings may move with other work on the machine"
            );
            let mut said = SAID.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if !said.contains(&line) {
                eprintln!("{line}");
                said.push(line);
            }
            false
        }
    }
}

/// Parses a CPU list in the kernel's notation (`0`, `0-3`, `0,2,4-5`), checked against the
/// CPUs this process may use.
pub fn parse_cpu_list(s: &str) -> std::result::Result<Vec<usize>, goodput_core::ValueError> {
    let bad = |why: String| goodput_core::ValueError::new(s, why);
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim) {
        let num = |x: &str| x.trim().parse::<usize>().map_err(|_| bad(format!("`{x}` is not a CPU number")));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(bad(format!("range {a}-{b} runs backwards")));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    let allowed = allowed();
    if let Some(c) = cpus.iter().find(|c| !allowed.contains(c)) {
        return Err(bad(format!(
            "CPU {c} is not available to this process (available: {})",
            format_cpu_list(&allowed)
        )));
    }
    Ok(cpus)
}

/// The kernel's notation for a sorted CPU list: `0-3,6`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_format_and_are_checked() {
        let first = allowed()[0];
        assert_eq!(parse_cpu_list(&first.to_string()).unwrap(), vec![first]);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert!(parse_cpu_list("4096").unwrap_err().expected.contains("not available"));
        assert!(parse_cpu_list("3-1").unwrap_err().expected.contains("backwards"));
        assert!(parse_cpu_list("a").unwrap_err().expected.contains("not a CPU number"));
    }

    #[test]
    fn a_pinned_thread_and_its_children_see_only_their_cpus() {
        let first = allowed()[0];
        std::thread::spawn(move || {
            pin_current(&[first]).unwrap();
            assert_eq!(allowed(), vec![first]);
            let child = std::thread::spawn(allowed).join().unwrap();
            assert_eq!(child, vec![first]);
        })
        .join()
        .unwrap();
        assert!(matches!(pin_current(&[]), Err(crate::EngineError::Pin(PinError::Empty))));
        let beyond = pin_current(&[usize::MAX]);
        assert!(matches!(beyond, Err(crate::EngineError::Pin(PinError::Beyond(usize::MAX)))), "{beyond:?}");
    }
    /// A CPU beyond what the system addresses cannot be pinned to: the failure is said (on
    /// stderr, once), not dropped, and the thread goes on unpinned.
    #[test]
    fn a_pin_that_fails_is_said() {
        assert!(!pin_current_or_warn(&[usize::MAX], "a test thread"));
        assert!(!pin_current_or_warn(&[], "a test thread"));
    }
}
