//! A server's `/metrics`: Prometheus text parsed with `prometheus-parse`, its series named
//! without the server's prefix. A page over [`crate::MAX_SCRAPE_BYTES`] or
//! [`MAX_SCRAPE_LINES`] is refused, and scrapes of that server stop for the run (the run goes
//! on without its server-side numbers, saying why).

use crate::{ClientError, HttpTarget, MetricsError};
use goodput_core::Stamp;

pub use goodput_core::ServerScrape;

/// What a `:` in a metric name becomes for `prometheus-parse`, whose name pattern is `\w+`
/// (colons are legal in Prometheus names, and vLLM's all have one).
const COLON: &str = "__colon__";

/// The most non-empty lines a `/metrics` page may hold (its series, and their HELP and TYPE
/// lines): one vLLM engine exposes about 1,500, so this is room for dozens of engines or
/// adapters. Each parsed line costs the client a few hundred bytes; a page of 1,000,000 series
/// took 464 MB.
pub const MAX_SCRAPE_LINES: usize = 100_000;

/// Why `text` is refused for its number of lines, if it is.
fn over_lines(text: &str) -> bool {
    text.lines().filter(|l| !l.trim().is_empty()).take(MAX_SCRAPE_LINES + 1).count() > MAX_SCRAPE_LINES
}

/// The name without a server's prefix: after the last `:`, or without `goodput_`.
fn bare(name: &str) -> &str {
    match name.rsplit_once(COLON) {
        Some((_, n)) => n,
        None => name.strip_prefix("goodput_").unwrap_or(name),
    }
}

/// `line` with the colons of its metric name mapped to [`COLON`] (label values untouched).
fn map_colons(line: &str) -> String {
    let (head, rest) = match line.strip_prefix('#') {
        Some(r) => {
            // `# HELP name …` / `# TYPE name …`: the third word is the name.
            let mut words = r.trim_start().splitn(2, ' ');
            let kind = words.next().unwrap_or("");
            let tail = words.next().unwrap_or("");
            let (name, after) = tail.split_once(' ').unwrap_or((tail, ""));
            return format!("# {kind} {} {after}", name.replace(':', COLON));
        }
        None => match line.find(|c: char| c == '{' || c.is_whitespace()) {
            Some(i) => line.split_at(i),
            None => (line, ""),
        },
    };
    format!("{}{rest}", head.replace(':', COLON))
}

/// Parses Prometheus text exposition (or OpenMetrics) with `prometheus-parse`; refuses text
/// of more than [`MAX_SCRAPE_LINES`] lines.
pub fn parse_metrics(text: &str, at: Stamp) -> Result<ServerScrape, MetricsError> {
    if over_lines(text) {
        return Err(MetricsError::TooLong { max: MAX_SCRAPE_LINES });
    }
    let lines = text.lines().filter(|l| l.trim() != "# EOF").map(|l| Ok(map_colons(l)));
    let scrape = prometheus_parse::Scrape::parse(lines).map_err(MetricsError::Exposition)?;
    let mut out = ServerScrape { at, ..Default::default() };
    for s in scrape.samples {
        let name = bare(&s.metric).to_string();
        match s.value {
            prometheus_parse::Value::Histogram(h) => {
                let e = out.histograms.entry(name).or_default();
                for b in h {
                    match e.iter_mut().find(|x| x.0 == b.less_than) {
                        Some(x) => x.1 += b.count,
                        None => e.push((b.less_than, b.count)),
                    }
                }
                e.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v)
            | prometheus_parse::Value::Counter(v) => {
                let (n, max) = out.label_sets.entry(name.clone()).or_insert((0, f64::NEG_INFINITY));
                *n += 1;
                *max = max.max(v);
                *out.gauges.entry(name).or_default() += v;
            }
            prometheus_parse::Value::Summary(_) => {}
        }
    }
    // A histogram's `_sum` and `_count` come as samples of their own.
    for h in out.histograms.keys() {
        if let Some(v) = out.gauges.remove(&format!("{h}_sum")) {
            out.sums.insert(h.clone(), v);
        }
        out.gauges.remove(&format!("{h}_count"));
        out.label_sets.remove(&format!("{h}_sum"));
        out.label_sets.remove(&format!("{h}_count"));
    }
    Ok(out)
}

impl HttpTarget {
    /// Scrapes the server's `/metrics`, within [`crate::HttpConfig::timeout`]. A page over a
    /// size bound fails with [`ClientError::Oversize`], and so does every later scrape, without
    /// a request.
    pub async fn scrape(&self) -> Result<ServerScrape, ClientError> {
        let url = format!("{}/metrics", self.cfg.base_url);
        if let Some(why) = self.scrapes_off.get() {
            return Err(ClientError::Oversize { url, why: why.clone() });
        }
        let scrape = self.within(&url, async {
            let mut resp = self.get(&url).await?;
            let text = crate::body::read_side(&mut resp, &url).await?;
            if over_lines(&text) {
                return Err(ClientError::Oversize {
                    url: url.clone(),
                    why: MetricsError::TooLong { max: MAX_SCRAPE_LINES }.to_string(),
                });
            }
            parse_metrics(&text, self.clock.now()).map_err(ClientError::from)
        });
        scrape.await.map_err(|e| match e {
            ClientError::Oversize { url, why } => {
                let why = format!("{why}: not scraped again this run");
                let _ = self.scrapes_off.set(why.clone());
                ClientError::Oversize { url, why }
            }
            e => e,
        })
    }

    /// `GET url`, a success status or the error naming it.
    pub(crate) async fn get(&self, url: &str) -> Result<reqwest::Response, ClientError> {
        let resp = self.request(reqwest::Method::GET, url).send().await;
        let resp = resp.map_err(|source| ClientError::Get { url: url.into(), source })?;
        if let Some(why) = crate::redirect(&resp) {
            return Err(ClientError::Redirect { url: url.into(), why });
        }
        if !resp.status().is_success() {
            return Err(ClientError::Status { url: url.into(), status: resp.status() });
        }
        Ok(resp)
    }
}
