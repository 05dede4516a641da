//! Test targets and plans shared by the drivers' tests.

use crate::level::{RetryPolicy, UnitPlan};
use goodput_core::{ClientRecord, Clock, RecordBuilder, Stamp, Target, WorkRequest};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A target with a fixed service time that counts how many requests run at once.
pub struct Fake {
    pub clock: Clock,
    pub in_flight: AtomicUsize,
    pub peak: AtomicUsize,
    pub service: Duration,
}

impl Target for Fake {
    fn clock(&self) -> Clock {
        self.clock
    }
    fn describe(&self) -> String {
        "fake".into()
    }
    async fn run(&self, req: WorkRequest, intended: Stamp) -> ClientRecord {
        let sent = self.clock.now();
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.service).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let end = self.clock.now();
        let n = req.params.max_tokens;
        RecordBuilder::new(req.id)
            .intended(intended)
            .sent(sent)
            .chunks([(end, n as u32)])
            .end(end)
            .input(req.prompt.len())
            .build()
    }
}

/// A [`Fake`] taking `ms` milliseconds per request.
pub fn fake(ms: u64) -> Arc<Fake> {
    Arc::new(Fake {
        clock: Clock::new(),
        in_flight: AtomicUsize::new(0),
        peak: AtomicUsize::new(0),
        service: Duration::from_millis(ms),
    })
}

/// `warmup + units` units over `users` users from id 100, all at once, no cool-down, retries,
/// sink or progress.
pub fn units(users: usize, units: usize, warmup: usize) -> UnitPlan {
    UnitPlan {
        users,
        units,
        warmup,
        cooldown: 0,
        timeout: Duration::from_secs(5),
        retry: RetryPolicy::default(),
        seed: 1,
        first_id: 100,
        sink: None,
        stop: Default::default(),
        ramp: Default::default(),
        progress: None,
    }
}
