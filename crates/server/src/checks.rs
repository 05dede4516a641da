//! What a served replica's policy and listener must hold before anything is loaded: a key
//! that is not empty, positive timeouts, host names without ports or schemes, and a cap on
//! connections the open-file limit allows.

use crate::{ListenLimits, Policy};

/// Why a policy or a listener's limits cannot be served, by the flag that sets them.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("--api-key is empty; give a key or leave the flag out")]
    EmptyApiKey,
    #[error("--header-timeout and --body-timeout must be positive")]
    ZeroTimeout,
    #[error("--allowed-hosts `{0}`: give host names without ports or schemes, e.g. `gpu1.example.com,.corp.example`")]
    BadHost(String),
    #[error("--max-connections must be at least 1")]
    NoConnections,
    #[error("--max-connections {given} exceeds what the open-file limit allows ({files} files, so at most {room} connections); raise `ulimit -n` or lower the flag")]
    OverFileLimit { given: usize, files: u64, room: usize },
}

impl Policy {
    /// The policy can be served: a key is not empty, the body timeout is positive, and each
    /// allowed host is a name (or a `.suffix`).
    pub fn check(&self) -> Result<(), LimitError> {
        if self.api_key.as_deref().is_some_and(str::is_empty) {
            return Err(LimitError::EmptyApiKey);
        }
        if self.body_timeout.is_zero() {
            return Err(LimitError::ZeroTimeout);
        }
        let names = &self.allowed_hosts.names;
        match names.iter().find(|n| n.trim_matches('.').is_empty() || n.contains([':', '/', ' '])) {
            Some(bad) => Err(LimitError::BadHost(bad.clone())),
            None => Ok(()),
        }
    }
}

impl ListenLimits {
    /// The connections served at once: `given`, or what the open-file limit `files` leaves
    /// (less 64 for the engine's own files, the listener and the log; 1024 when unknown).
    pub fn max_connections(given: Option<usize>, files: Option<u64>) -> Result<usize, LimitError> {
        let room = files.map(|n| n.saturating_sub(64) as usize);
        match (given, room) {
            (Some(0), _) => Err(LimitError::NoConnections),
            (Some(given), Some(room)) if given > room => {
                Err(LimitError::OverFileLimit { given, files: files.unwrap_or(0), room })
            }
            (Some(n), _) => Ok(n),
            (None, room) => Ok(room.map_or(1024, |r| r.max(1))),
        }
    }

    /// The limits can be served: the header timeout is positive.
    pub fn check(&self) -> Result<(), LimitError> {
        if self.header_timeout.is_zero() {
            return Err(LimitError::ZeroTimeout);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bad_policies_and_limits_are_refused_by_flag() {
        let with = |f: fn(&mut Policy)| {
            let mut p = Policy::default();
            f(&mut p);
            p.check()
        };
        assert_eq!(with(|_| {}), Ok(()));
        assert_eq!(with(|p| p.api_key = Some(String::new())), Err(LimitError::EmptyApiKey));
        assert_eq!(with(|p| p.body_timeout = Duration::ZERO), Err(LimitError::ZeroTimeout));
        let bad = with(|p| p.allowed_hosts.names = vec!["ok.example".into(), "h:80".into()]);
        assert_eq!(bad, Err(LimitError::BadHost("h:80".into())));
        assert_eq!(ListenLimits::max_connections(None, Some(1088)), Ok(1024));
        assert_eq!(ListenLimits::max_connections(None, None), Ok(1024));
        assert_eq!(ListenLimits::max_connections(None, Some(10)), Ok(1));
        assert_eq!(ListenLimits::max_connections(Some(0), None), Err(LimitError::NoConnections));
        let over = ListenLimits::max_connections(Some(100), Some(128));
        assert_eq!(over, Err(LimitError::OverFileLimit { given: 100, files: 128, room: 64 }));
        let limits = ListenLimits { grace: Duration::ZERO, max_connections: 1, header_timeout: Duration::ZERO };
        assert_eq!(limits.check(), Err(LimitError::ZeroTimeout));
    }
}
