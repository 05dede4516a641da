#!/usr/bin/env python3
"""Writes grafana/goodput.json: a Grafana dashboard for `goodput serve`'s /metrics (vLLM's
metric names under `goodput_`; the `prefix` variable switches it to a vLLM server's `vllm:`)
and for a running `goodput run --metrics-port` (`goodput_run_*`). Built with Grafana's own
Foundation SDK rather than by hand:

    python3 -m venv /tmp/gfs && /tmp/gfs/bin/pip install grafana-foundation-sdk==1769699998!10.1.0
    /tmp/gfs/bin/python scripts/grafana-dashboard.py            # → grafana/goodput.json

tests/it/dashboard.rs evaluates every panel's query against a real Prometheus scraping both.
"""
import json
import pathlib

from grafana_foundation_sdk.builders import dashboard, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"


def q(expr, legend):
    return prometheus.Dataquery().expr(expr).legend_format(legend)


def panel(title, unit, desc, *queries, w=12):
    p = timeseries.Panel().title(title).unit(unit).description(desc).datasource(DS).height(8).span(w)
    for i, query in enumerate(queries):
        p = p.with_target(query.ref_id(chr(ord("A") + i)))
    return p


def quantiles(metric, what):
    """P50 and P95 of a histogram over the rate window."""
    return [
        q(f"histogram_quantile({p}, sum by (le) (rate({metric}_bucket[{RATE}])))", f"{what} P{int(p * 100)}")
        for p in (0.5, 0.95)
    ]


def server_panels():
    s = "${prefix}"
    return [
        panel("Requests running and waiting", "short", "The engine's batch and its queue (gauges).",
              q(f"{s}num_requests_running", "running"), q(f"{s}num_requests_waiting", "waiting")),
        panel("KV-cache usage", "percentunit", "Share of the KV-cache blocks in use (1 is full).",
              q(f"{s}kv_cache_usage_perc", "KV usage")),
        panel("Time to first token", "s", "Server receipt to first token, P50 and P95 over the rate window.",
              *quantiles(f"{s}time_to_first_token_seconds", "TTFT")),
        panel("Inter-token latency", "s", "Time between consecutive tokens of a request, P50 and P95.",
              *quantiles(f"{s}inter_token_latency_seconds", "ITL")),
        panel("End-to-end latency", "s", "Server receipt to the request's end, P50 and P95.",
              *quantiles(f"{s}e2e_request_latency_seconds", "E2E")),
        panel("Queue time", "s", "Time waiting in the scheduler before the first step, P50 and P95.",
              *quantiles(f"{s}request_queue_time_seconds", "queue")),
        panel("Token throughput", "short", "Prompt and generated tokens per second.",
              q(f"rate({s}prompt_tokens_total[{RATE}])", "prompt tok/s"),
              q(f"rate({s}generation_tokens_total[{RATE}])", "generated tok/s")),
        panel("Prefix-cache hit rate", "percentunit", "Prompt tokens found in the prefix cache over those looked up.",
              q(f"rate({s}prefix_cache_hits_total[{RATE}]) / rate({s}prefix_cache_queries_total[{RATE}])", "hits")),
        panel("Preemptions", "short", "Requests preempted per second (their KV blocks taken back).",
              q(f"rate({s}num_preemptions_total[{RATE}])", "preemptions/s")),
    ]


def run_panels():
    r = "goodput_run"
    return [
        panel("Load level running", "short", "The load of the sweep's level running (goodput_run_info has the unit).",
              q(f"{r}_level", "load"), q(f"{r}_level_number", "level #")),
        panel("Requests ended", "reqps", "Requests ended per second, by phase and outcome.",
              q(f"sum by (phase, outcome) (rate({r}_requests_total[{RATE}]))", "{{phase}} {{outcome}}")),
        panel("Rolling TTFT and TPOT (live view)", "s", "P50 and P95 over the last 200 requests to end, as the run's live line shows them.",
              q(f"{r}_rolling_ttft_seconds", "TTFT P{{quantile}}"), q(f"{r}_rolling_tpot_seconds", "TPOT P{{quantile}}")),
        panel("Measured TTFT", "s", "Intended send to first token of the measured requests, P50 and P95.",
              *quantiles(f"{r}_time_to_first_token_seconds", "TTFT")),
        panel("Measured TPOT", "s", "Time per output token of the measured requests, P50 and P95.",
              *quantiles(f"{r}_request_time_per_output_token_seconds", "TPOT")),
        panel("Output tokens", "short", "Output tokens per second of the requests ended (every phase).",
              q(f"rate({r}_output_tokens_total[{RATE}])", "tok/s")),
    ]


def build():
    d = (
        dashboard.Dashboard("goodput: serving and the benchmark")
        .uid("goodput")
        .tags(["goodput", "vllm", "llm"])
        .refresh("5s")
        .time("now-30m", "now")
        .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
        .with_variable(
            dashboard.CustomVariable("prefix")
            .label("Metric prefix")
            .values("goodput_,vllm:")
            .description("goodput_ for goodput serve, vllm: for a vLLM server (the same series)")
        )
        .with_row(dashboard.Row("Server: goodput serve, or vLLM with prefix vllm:"))
    )
    for p in server_panels():
        d = d.with_panel(p)
    d = d.with_row(dashboard.Row("Benchmark: goodput run --metrics-port"))
    for p in run_panels():
        d = d.with_panel(p)
    return d.build()


if __name__ == "__main__":
    out = pathlib.Path(__file__).resolve().parent.parent / "grafana" / "goodput.json"
    text = json.dumps(json.loads(JSONEncoder(sort_keys=True).encode(build())), indent=2, sort_keys=True)
    out.write_text(text + "\n")
    print(f"wrote {out}")
