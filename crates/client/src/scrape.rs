//! A server's `/metrics`: Prometheus text parsed with `prometheus-parse`, its series named
//! without the server's prefix.

use crate::{ClientError, HttpTarget};
use goodput_core::Stamp;

pub use goodput_core::ServerScrape;

/// What a `:` in a metric name becomes for `prometheus-parse`, whose name pattern is `\w+`
/// (colons are legal in Prometheus names, and vLLM's all have one).
const COLON: &str = "__colon__";

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

/// Parses Prometheus text exposition (or OpenMetrics) with `prometheus-parse`.
pub fn parse_metrics(text: &str, at: Stamp) -> Result<ServerScrape, String> {
    let lines = text.lines().filter(|l| l.trim() != "# EOF").map(|l| Ok(map_colons(l)));
    let scrape = prometheus_parse::Scrape::parse(lines).map_err(|e| format!("parsing /metrics: {e}"))?;
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
    /// Scrapes the server's `/metrics`.
    pub async fn scrape(&self) -> Result<ServerScrape, ClientError> {
        let url = format!("{}/metrics", self.cfg.base_url);
        let resp = self.get(&url).await?;
        let text = resp.text().await.map_err(|source| ClientError::Get { url, source })?;
        parse_metrics(&text, self.clock.now()).map_err(ClientError::Metrics)
    }

    /// `GET url`, a success status or the error naming it.
    pub(crate) async fn get(&self, url: &str) -> Result<reqwest::Response, ClientError> {
        let resp = self.client.get(url).send().await.map_err(|source| ClientError::Get { url: url.into(), source })?;
        if !resp.status().is_success() {
            return Err(ClientError::Status { url: url.into(), status: resp.status() });
        }
        Ok(resp)
    }
}
