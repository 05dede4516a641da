//! The process's open-file limit (RLIMIT_NOFILE): read, and its soft limit raised toward the
//! hard limit for what a command needs. Every HTTP stream is a socket, on both sides when the
//! server runs in this process, so a thousand users need thousands of files where a login
//! shell allows 1024; past the limit each new connection fails with EMFILE ("Too many open
//! files"). `goodput run`, `goodput calibrate` and `goodput serve` size themselves here.

/// Files one HTTP connection may hold on one side: its socket, and room for the connection
/// replacing it while the old one closes.
pub const PER_CONNECTION: u64 = 2;
/// The process's own files beside its connections: binaries and model files, the results
/// files, the runtime's epoll, event and timer descriptors, the listener.
pub const MARGIN: u64 = 256;

/// The limits on open files; `u64::MAX` stands for no limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub soft: u64,
    pub hard: u64,
}

/// Open files for `connections` connections in flight, each with `sides` ends in this process
/// (1 against another process's server, 2 against one in this process), and the margin.
pub fn needed(connections: u64, sides: u64) -> u64 {
    connections.saturating_mul(sides).saturating_mul(PER_CONNECTION).saturating_add(MARGIN)
}

/// The soft limit that gives `need` open files under `limit`, if it must change: `need`, or
/// the hard limit when that is lower (which then falls short). `None` when the soft limit
/// already suffices (a soft limit is never lowered).
pub fn raised(need: u64, limit: Limit) -> Option<u64> {
    (limit.soft < need).then(|| need.min(limit.hard)).filter(|&to| to > limit.soft)
}

/// Files beside those already open that a warning leaves for what opens later (results
/// files, a scrape, a reconnect).
pub const SPARE: u64 = 32;

/// Requests in flight, each holding a socket on `sides` sides, that fit in a soft limit of
/// `soft` files with `open` already open (and [`SPARE`] left over).
pub fn room(soft: u64, open: u64, sides: u64) -> u64 {
    soft.saturating_sub(open.saturating_add(SPARE)) / sides.max(1)
}

/// Files this process has open now (Linux: `/proc/self/fd`).
pub fn open_now() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

/// The process's limits, where the platform says.
pub fn limit() -> Option<Limit> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we pass and reads nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return None;
    }
    // rlim_t is u64 on Linux and macOS, but not on every platform libc serves.
    #[allow(clippy::unnecessary_cast)]
    let n = |x: libc::rlim_t| if x == libc::RLIM_INFINITY { u64::MAX } else { x as u64 };
    Some(Limit { soft: n(r.rlim_cur), hard: n(r.rlim_max) })
}

/// The soft limit on open files, `None` when unlimited or unknown.
pub fn soft_limit() -> Option<u64> {
    limit().map(|l| l.soft).filter(|&s| s != u64::MAX)
}

/// Raises the soft limit toward `need` as far as the hard limit allows ([`raised`]); returns
/// the limits after (`None` when the platform tells none).
pub fn raise_for(need: u64) -> Option<Limit> {
    let before = limit()?;
    let Some(to) = raised(need, before) else { return Some(before) };
    #[allow(clippy::unnecessary_cast)]
    let r = libc::rlimit {
        rlim_cur: to as libc::rlim_t,
        rlim_max: if before.hard == u64::MAX { libc::RLIM_INFINITY } else { before.hard as libc::rlim_t },
    };
    // SAFETY: setrlimit reads the struct we pass; a soft limit at or below the hard one is
    // always allowed, and a refusal leaves the limits as they were.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    limit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_rises_to_what_is_needed_and_no_further_than_the_hard_one() {
        // 1000 users against another process's server: 1000 · 1 · 2 + 256; on loopback to
        // goodput's own server, both sockets: 1000 · 2 · 2 + 256.
        assert_eq!(needed(1000, 1), 2256);
        assert_eq!(needed(1000, 2), 4256);
        assert_eq!(needed(0, 2), MARGIN);
        assert_eq!(needed(u64::MAX, 2), u64::MAX);
        let l = |soft, hard| Limit { soft, hard };
        assert_eq!(raised(2256, l(1024, 524_288)), Some(2256));
        assert_eq!(raised(2256, l(1024, 2048)), Some(2048), "as far as the hard limit allows");
        assert_eq!(raised(2256, l(4096, 524_288)), None, "never lowered");
        assert_eq!(raised(2256, l(2048, 2048)), None, "nothing to gain");
        assert_eq!(raised(2256, l(1024, u64::MAX)), Some(2256));
    }

    #[test]
    fn room_is_what_the_soft_limit_leaves_per_request() {
        // 300 files, 40 open, 32 spare: 228 sockets, 114 requests with both ends here.
        assert_eq!(room(300, 40, 1), 228);
        assert_eq!(room(300, 40, 2), 114);
        assert_eq!(room(50, 40, 2), 0);
        assert!(open_now().is_some_and(|n| n >= 3), "stdin, stdout, stderr at least");
    }

    #[test]
    fn this_process_has_limits_and_keeps_them_when_it_needs_less() {
        let before = limit().expect("Linux tells its limits");
        assert!(before.soft <= before.hard);
        assert_eq!(raise_for(1), Some(before));
    }
}
