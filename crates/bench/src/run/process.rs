//! The target's process sampled while a level runs, for a soak's memory, descriptors and
//! connections ([`goodput_metrics::soak::ProcessSample`]): an HTTP target's from its
//! `/metrics` scrapes ([`of_scrapes`]), the in-process engine's from `/proc/self` on a thread
//! of its own ([`Sampler`]), every [`EVERY`].

use goodput_core::{Clock, ServerScrape};
use goodput_metrics::soak::ProcessSample;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How often the in-process sampler reads `/proc/self`.
pub const EVERY: Duration = Duration::from_secs(1);

/// The process figures of each scrape ([`ProcessSample::of_scrape`]).
pub fn of_scrapes(scrapes: &[ServerScrape]) -> Vec<ProcessSample> {
    scrapes.iter().filter_map(ProcessSample::of_scrape).collect()
}

/// This process sampled every [`EVERY`] until [`Sampler::finish`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<ProcessSample>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling on `clock` (the target's); without a thread the level keeps no samples.
    pub fn start(clock: Clock) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (s, out) = (stop.clone(), samples.clone());
        let thread = std::thread::Builder::new()
            .name("goodput-process".into())
            .spawn(move || {
                let mut waited = EVERY;
                while !s.load(Ordering::Relaxed) {
                    if waited >= EVERY {
                        let (rss_bytes, open_fds) = goodput_server::metrics::process_gauges();
                        let sample = ProcessSample { at: clock.now(), rss_bytes, open_fds, connections: None };
                        out.lock().unwrap_or_else(PoisonError::into_inner).push(sample);
                        waited = Duration::ZERO;
                    }
                    // Short naps, so finishing never waits a whole period.
                    std::thread::sleep(Duration::from_millis(50));
                    waited += Duration::from_millis(50);
                }
            })
            .ok();
        Sampler { stop, samples, thread }
    }

    /// Stops the sampling; the samples taken.
    pub fn finish(mut self) -> Vec<ProcessSample> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.samples.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_is_sampled_from_proc_and_from_scrapes() {
        let clock = Clock::new();
        let s = Sampler::start(clock);
        std::thread::sleep(Duration::from_millis(120));
        let got = s.finish();
        assert!(!got.is_empty());
        assert!(got[0].rss_bytes.unwrap() > 1e6 && got[0].open_fds.unwrap() >= 3.0, "{got:?}");
        let text = "process_resident_memory_bytes 1.05e9\nprocess_open_fds 34\nvllm:num_requests_running 2\n";
        let scrape = goodput_client::parse_metrics(text, clock.now()).unwrap();
        let none = goodput_client::parse_metrics("vllm:num_requests_running 2\n", clock.now()).unwrap();
        let p = of_scrapes(&[scrape, none]);
        assert_eq!(p.len(), 1, "a scrape without the process figures is no sample");
        assert_eq!((p[0].rss_bytes, p[0].open_fds, p[0].connections), (Some(1.05e9), Some(34.0), None));
    }
}
