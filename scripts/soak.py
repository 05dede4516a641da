#!/usr/bin/env python3
"""Soak load for `goodput serve` (driven by scripts/soak.sh; Python 3 stdlib only).

Sends N requests (or requests for M minutes) from C concurrent clients to a running server on
127.0.0.1, each on its own HTTP/1.1 connection written over raw asyncio streams. Each request
draws its kind from MIX with a generator seeded by (seed, request index), so the mix is the
same on every run whatever the scheduling:

- ``stream``       streamed /v1/completions, ignore_eos; must end with finish_reason "length",
                   ``goodput.generated_tokens == max_tokens`` and ``data: [DONE]``;
- ``whole``        the same, not streamed; ``usage.completion_tokens == max_tokens``;
- ``chat_stream``, ``chat_whole``  /v1/chat/completions with a system and a user message;
- ``abort_stream`` a streamed completion whose socket we close after 1-3 events;
- ``disconnect``   a completion (streamed or whole) whose socket we close right after sending;
- ``bad_body``     malformed JSON, wrong types, an empty body (400), an unknown model (404),
                   or a text/plain content type (415);
- ``oversized``    a prompt longer than the context, or prompt + max_tokens beyond it (400);
- ``silent``       a connection that sends nothing, ``h2_idle`` one that sends the HTTP/2 (h2c)
                   preface and an empty SETTINGS frame and nothing more, ``half_head`` one that
                   sends half a request head: the server must close each within
                   ``--header-timeout`` (2 s in soak.sh) plus a second, holding no slot.

Prompts are short random words, a third of them behind a shared preamble (prefix-cache hits);
max_tokens is small (1-MAX_TOKENS) so 10,000 requests fit in minutes on two cores. Any
generation request may be answered 429 (``--max-waiting``): with C clients above
``--max-num-seqs`` + ``--max-waiting`` some are. A client answered 429 backs off exponentially
(1 s doubling to 8 s, with jitter); its count of recent 429s falls by one per other answer.

Outcomes are counted per kind: ``ok``, ``aborted`` (by us), ``4xx:<status>`` (expected ones),
``429``, ``5xx:<status>``, ``conn_error``, ``timeout``, ``unexpected:<why>``. Every ~2 s a
sampler writes the server's RSS (``/proc/PID/status`` VmRSS) and its running / waiting /
KV-usage gauges (from ``/metrics``) to soak.csv. At the end, once the engine is idle (at most
5 s), ``checks()`` runs: every request answered as expected, no 5xx, running = waiting = KV
usage = 0, RSS growth < 5 % from warm-up to the end (medians of the samples over 10-30 % and
over the last 20 % of the load, see ``rss_windows``), no "panicked" in server.log. The result goes to soak.json, and the exit
status is 0 when all pass, 1 when not.
"""

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict

HOST = "127.0.0.1"
MAX_TOKENS = 16
REQUEST_TIMEOUT_S = 120.0
SAMPLE_EVERY_S = 2.0
SCRAPE_TIMEOUT_S = 10.0
IDLE_WAIT_S = 5.0
BACKOFF_S = (1.0, 8.0)  # first and longest backoff after a 429
RSS_GROWTH_LIMIT = 0.05
PREAMBLE = "You are a terse assistant. Answer in one short line, without any preamble. "
WORDS = ("alpha beta gamma delta kernel cache block token batch queue prefill decode "
         "stream socket server engine memory page warm cold fast slow").split()
MIX = [  # (kind, weight)
    ("stream", 30), ("whole", 12), ("chat_stream", 10), ("chat_whole", 6),
    ("abort_stream", 12), ("disconnect", 8), ("bad_body", 14), ("oversized", 8),
    ("silent", 2), ("h2_idle", 2), ("half_head", 2),
]
HEADER_TIMEOUT_S = 2.0  # soak.sh's --header-timeout
CLOSE_SLACK_S = 1.5
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
GAUGES = {"running": "goodput_num_requests_running",
          "waiting": "goodput_num_requests_waiting",
          "kv": "goodput_kv_cache_usage_perc"}
CONNECTIONS = "goodput_http_connections"


class Unexpected(Exception):
    """A response that breaks the protocol or the request's contract."""


# --- HTTP over raw asyncio streams -------------------------------------------------------

async def send(port, method, path, body=b"", ctype="application/json"):
    """Opens a connection and writes one request; returns (reader, writer)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    head = [f"{method} {path} HTTP/1.1", f"Host: {HOST}:{port}", "Connection: close"]
    if method == "POST":
        if ctype:
            head.append(f"Content-Type: {ctype}")
        head.append(f"Content-Length: {len(body)}")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    await writer.drain()
    return reader, writer


async def read_head(reader):
    """The status code and the (lower-cased) headers of a response."""
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers


async def body_chunks(reader, headers):
    """Yields the body as it arrives: chunked, by content-length, or up to EOF."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = await reader.readline()
            if not line.endswith(b"\n"):
                raise asyncio.IncompleteReadError(line, None)  # EOF inside a chunked body
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                return
            data = await reader.readexactly(size + 2)
            yield data[:-2]
    elif "content-length" in headers:
        yield await reader.readexactly(int(headers["content-length"]))
    else:
        while data := await reader.read(65536):
            yield data


async def read_body(reader, headers):
    return b"".join([c async for c in body_chunks(reader, headers)])


async def sse_events(reader, headers):
    """Yields each server-sent event's data (str)."""
    buf = b""
    async for chunk in body_chunks(reader, headers):
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            data = [ln[5:].strip() for ln in event.split(b"\n") if ln.startswith(b"data:")]
            if data:
                yield b"\n".join(data).decode()


def close(writer):
    try:
        writer.close()
    except OSError:
        pass


async def get(port, path):
    """A GET's status and body."""
    reader, writer = await send(port, "GET", path)
    try:
        status, headers = await read_head(reader)
        return status, await read_body(reader, headers)
    finally:
        close(writer)


# --- Request bodies ----------------------------------------------------------------------

def prompt_text(rng):
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 24)))
    return PREAMBLE + words if rng.random() < 0.33 else words


def completion_body(rng, stream, max_tokens=None):
    return {"model": "tiny", "prompt": prompt_text(rng), "stream": stream, "ignore_eos": True,
            "max_tokens": max_tokens or rng.randint(1, MAX_TOKENS)}


def chat_body(rng, stream):
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": prompt_text(rng)}]
    return {"model": "tiny", "messages": messages, "stream": stream, "ignore_eos": True,
            "max_tokens": rng.randint(1, MAX_TOKENS)}


def bad_body(rng):
    """(path, body bytes, content type, expected status) of a request the server must refuse."""
    path = rng.choice(["/v1/completions", "/v1/chat/completions"])
    good = json.dumps({"model": "tiny", "prompt": "hi", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": 4}).encode()
    cases = [
        (b'{"model": "tiny", "prompt": "unterminated', "application/json", 400),
        (b'{"model": "tiny", "prompt": 42, "messages": "hi", "max_tokens": "ten"}', "application/json", 400),
        (b"", "application/json", 400),
        (good.replace(b'"tiny"', b'"no-such-model"'), "application/json", 404),
        (good, "text/plain", 415),
    ]
    return (path, *rng.choice(cases))


def oversized_body(rng, max_len):
    """A prompt past the context (byte-level text: a token per byte), or one that leaves no room
    for max_tokens."""
    if rng.random() < 0.7:
        prompt, max_tokens = "x" * (max(max_len, 512) + rng.randint(1, 256)), 4
    else:
        prompt, max_tokens = "y" * (max_len - 4), 32
    return {"model": "tiny", "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True}


# --- One request of each kind ------------------------------------------------------------

async def post(port, path, body, ctype="application/json"):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await send(port, "POST", path, raw, ctype)


def refused(status):
    """The outcome of a non-200 answer to a valid generation request."""
    if status == 429:
        return "429"
    if status >= 500:
        return f"5xx:{status}"
    return f"unexpected:status {status}"


async def run_stream(port, path, body, abort_after=None):
    reader, writer = await post(port, path, body)
    try:
        status, headers = await read_head(reader)
        if status != 200:
            await read_body(reader, headers)
            return refused(status)
        return await check_stream(reader, headers, body["max_tokens"], abort_after)
    finally:
        close(writer)


async def check_stream(reader, headers, max_tokens, abort_after):
    events, last = 0, None
    async for data in sse_events(reader, headers):
        if data == "[DONE]":
            return stream_verdict(last, max_tokens)
        last = json.loads(data)
        if "error" in last:
            return f"5xx:stream error {last['error'].get('code')}"
        events += 1
        if abort_after is not None and events >= abort_after:
            return "aborted"
    raise Unexpected("stream ended without [DONE]")


def stream_verdict(last, max_tokens):
    if last is None or last["choices"][0].get("finish_reason") != "length":
        raise Unexpected("last chunk has no finish_reason length")
    if last.get("goodput", {}).get("generated_tokens") != max_tokens:
        raise Unexpected("generated_tokens != max_tokens")
    return "ok"


async def run_whole(port, path, body):
    reader, writer = await post(port, path, body)
    try:
        status, headers = await read_head(reader)
        payload = await read_body(reader, headers)
        if status != 200:
            return refused(status)
        reply = json.loads(payload)
        if reply["usage"]["completion_tokens"] != body["max_tokens"]:
            raise Unexpected("completion_tokens != max_tokens")
        return "ok"
    finally:
        close(writer)


async def run_disconnect(port, body):
    _, writer = await post(port, "/v1/completions", body)
    close(writer)
    return "aborted"


async def run_refused(port, path, body, ctype, expected):
    reader, writer = await post(port, path, body, ctype)
    try:
        status, headers = await read_head(reader)
        reply = json.loads(await read_body(reader, headers) or b"{}")
        if status != expected or "error" not in reply:
            return refused(status) if status >= 500 else f"unexpected:status {status} for {expected}"
        return f"4xx:{status}"
    finally:
        close(writer)


async def run_idle_probe(port, first_bytes):
    """Opens a connection, writes `first_bytes` (maybe none) and waits for the server to close
    it: "closed" within the header timeout and its slack, else unexpected."""
    reader, writer = await asyncio.open_connection(HOST, port)
    t0 = time.monotonic()
    try:
        if first_bytes:
            writer.write(first_bytes)
            await writer.drain()
        limit = HEADER_TIMEOUT_S + CLOSE_SLACK_S
        try:
            while await asyncio.wait_for(reader.read(4096), limit - (time.monotonic() - t0)):
                pass  # an h2 server's SETTINGS, GOAWAY, or an HTTP/1 408 before the close
        except asyncio.TimeoutError:
            raise Unexpected(f"still open after {limit} s") from None
        except ConnectionResetError:
            pass
        return "closed"
    finally:
        close(writer)


async def one_request(kind, rng, port, max_len):
    if kind == "silent":
        return await run_idle_probe(port, b"")
    if kind == "h2_idle":
        return await run_idle_probe(port, H2_PREFACE)
    if kind == "half_head":
        return await run_idle_probe(port, f"POST /v1/completions HTTP/1.1\r\nHost: {HOST}:{port}\r\n".encode())
    if kind == "stream":
        return await run_stream(port, "/v1/completions", completion_body(rng, True))
    if kind == "whole":
        return await run_whole(port, "/v1/completions", completion_body(rng, False))
    if kind == "chat_stream":
        return await run_stream(port, "/v1/chat/completions", chat_body(rng, True))
    if kind == "chat_whole":
        return await run_whole(port, "/v1/chat/completions", chat_body(rng, False))
    if kind == "abort_stream":
        body = completion_body(rng, True, max_tokens=MAX_TOKENS * 2)
        return await run_stream(port, "/v1/completions", body, abort_after=rng.randint(1, 3))
    if kind == "disconnect":
        return await run_disconnect(port, completion_body(rng, rng.random() < 0.5))
    if kind == "bad_body":
        path, raw, ctype, expected = bad_body(rng)
        return await run_refused(port, path, raw, ctype, expected)
    return await run_refused(port, "/v1/completions", oversized_body(rng, max_len), "application/json", 400)


async def attempt(kind, rng, port, max_len):
    """One request's outcome, never raising."""
    try:
        return await asyncio.wait_for(one_request(kind, rng, port, max_len), REQUEST_TIMEOUT_S)
    except asyncio.TimeoutError:
        return "timeout"
    except Unexpected as e:
        return f"unexpected:{e}"
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
        return f"conn_error:{type(e).__name__}"
    except (ValueError, KeyError, IndexError, TypeError) as e:
        return f"unexpected:bad response ({type(e).__name__})"


# --- The load ----------------------------------------------------------------------------

class Load:
    """Hands out request indices and counts outcomes."""

    def __init__(self, args, max_len):
        self.args, self.max_len = args, max_len
        self.started = time.monotonic()
        self.deadline = self.started + args.minutes * 60 if args.minutes else None
        self.next_index = self.done = 0
        self.outcomes = defaultdict(Counter)
        self.warmed = asyncio.Event()
        self.rss = []  # (progress, rss_kib) of every sample
        self.ended = asyncio.Event()  # set when no request is left to hand out

    async def pause(self, seconds):
        """Sleeps, but not past the end of the load."""
        if self.deadline is not None:
            seconds = min(seconds, max(0.0, self.deadline - time.monotonic()))
        if not self.over():
            try:
                await asyncio.wait_for(self.ended.wait(), seconds)
            except asyncio.TimeoutError:
                pass

    def over(self):
        if self.deadline is not None:
            return time.monotonic() >= self.deadline
        return self.next_index >= self.args.requests

    def take(self):
        """The next request's index, or None when the load is over."""
        if self.over():
            self.ended.set()
            return None
        self.next_index += 1
        return self.next_index - 1

    def progress(self):
        """The fraction of the load done (requests or time)."""
        if self.deadline is not None:
            return (time.monotonic() - self.started) / (self.deadline - self.started)
        return self.done / self.args.requests

    def record(self, kind, outcome):
        self.outcomes[kind][outcome] += 1
        self.done += 1
        if self.progress() >= 0.1:
            self.warmed.set()


def kind_of(rng):
    kinds, weights = zip(*MIX)
    return rng.choices(kinds, weights)[0]


def backoff_s(rng, refusals):
    """Exponential backoff with jitter, by the worker's count of recent 429s."""
    return min(BACKOFF_S[1], BACKOFF_S[0] * 2 ** (refusals - 1)) * rng.uniform(0.5, 1.5)


async def worker(load):
    refusals = 0  # recent 429s: one more per 429, one less per other answer
    while (i := load.take()) is not None:
        rng = random.Random(load.args.seed * 1_000_003 + i)
        kind = kind_of(rng)
        outcome = await attempt(kind, rng, load.args.port, load.max_len)
        load.record(kind, outcome)
        if outcome == "429":  # back off as a client should, or 429s would be most of the load
            refusals += 1
            await load.pause(backoff_s(rng, refusals))
        else:
            refusals = max(0, refusals - 1)


# --- Sampling the server -----------------------------------------------------------------

def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def parse_gauges(text):
    """The GAUGES' values from Prometheus text (the series with a model_name label)."""
    found = {}
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)", line)
        if not m or line.startswith("#"):
            continue
        for key, name in GAUGES.items():
            if m.group(1) == name and "model_name=" in (m.group(2) or ""):
                found[key] = float(m.group(3))
    return found


async def scrape(port):
    status, body = await asyncio.wait_for(get(port, "/metrics"), SCRAPE_TIMEOUT_S)
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    gauges = parse_gauges(body.decode())
    m = re.search("^" + CONNECTIONS + r"(?:\{[^}]*\})?\s+(\S+)", body.decode(), re.M)
    if m:
        gauges["connections"] = float(m.group(1))
    missing = set(GAUGES) - set(gauges)
    if missing:
        raise RuntimeError(f"/metrics lacks {sorted(missing)}")
    return gauges


async def sample(load, csv):
    """One CSV row: (t_s, requests_done, rss_kib, running, waiting, kv_usage)."""
    rss = rss_kib(load.args.pid)
    g = await scrape(load.args.port)
    row = (round(time.monotonic() - load.started, 2), load.done, rss, g["running"], g["waiting"], g["kv"])
    load.rss.append((min(load.progress(), 1.0), rss))
    csv.write(",".join(str(x) for x in row) + "\n")
    csv.flush()
    return row


async def sampler(load, csv, stop):
    n = 0
    while not stop.is_set():
        try:
            row = await sample(load, csv)
        except (OSError, RuntimeError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
            print(f"soak: sample failed: {e!r}", file=sys.stderr)
        else:
            n += 1
            if n % 15 == 0:
                print(f"soak: t={row[0]:.0f}s done={row[1]} rss={row[2]} KiB running={row[3]:.0f} "
                      f"waiting={row[4]:.0f} kv={row[5]:.3f}", file=sys.stderr)
        try:
            await asyncio.wait_for(stop.wait(), SAMPLE_EVERY_S)
        except asyncio.TimeoutError:
            pass


async def warmup_rss(load):
    await load.warmed.wait()
    return rss_kib(load.args.pid)


async def wait_idle(port):
    """The gauges once running, waiting and KV usage are all 0, or the last seen after 5 s."""
    end = time.monotonic() + IDLE_WAIT_S
    while True:
        g = await scrape(port)
        # The scrape's own connection is the one left open.
        quiet = g.get("connections", 1) <= 1
        if ((g["running"], g["waiting"], g["kv"]) == (0, 0, 0) and quiet) or time.monotonic() >= end:
            return g
        await asyncio.sleep(0.1)


# --- Checks and the report ---------------------------------------------------------------

def totals(outcomes):
    all_ = Counter()
    for c in outcomes.values():
        all_.update(c)
    return all_


def count(all_, prefix):
    return sum(n for k, n in all_.items() if k.startswith(prefix))


def panics(log_path):
    with open(log_path, errors="replace") as f:
        return [ln.rstrip() for ln in f if "panicked" in ln]


def checks(load, all_, idle, rss0, rss1, log_path):
    """[(name, passed, detail)]."""
    growth = (rss1 - rss0) / rss0
    total = sum(all_.values())
    want_total = None if load.deadline else load.args.requests
    bad = {k: n for k, n in all_.items() if k.startswith(("unexpected", "conn_error", "timeout"))}
    found = panics(log_path)
    return [
        ("all requests done", want_total in (None, total), f"{total} of {want_total or 'the time budget'}"),
        ("no 5xx", count(all_, "5xx") == 0, str({k: n for k, n in all_.items() if k.startswith("5xx")})),
        ("no unexpected outcomes", not bad, str(bad)),
        ("final running == 0", idle["running"] == 0, str(idle["running"])),
        ("final waiting == 0", idle["waiting"] == 0, str(idle["waiting"])),
        ("final KV usage == 0", idle["kv"] == 0, str(idle["kv"])),
        ("final open connections <= 1 (the scrape's own)", idle.get("connections", 1) <= 1,
         str(idle.get("connections", "not exposed"))),
        ("RSS growth after warm-up < 5 %", growth < RSS_GROWTH_LIMIT,
         f"{rss0} -> {rss1} KiB ({growth * 100:+.2f} %)"),
        ("no panic in server.log", not found, found[0] if found else "none"),
    ]


def report(load, rss0, rss1, idle, results, wall_s):
    all_ = totals(load.outcomes)
    return {
        "config": {k: v for k, v in vars(load.args).items()
                   if k != "out" and not (k == "requests" and load.deadline)},
        "wall_s": round(wall_s, 1),
        "requests": sum(all_.values()),
        "outcomes": dict(sorted(all_.items())),
        "by_kind": {k: dict(sorted(c.items())) for k, c in sorted(load.outcomes.items())},
        "rss_warmup_kib": rss0, "rss_final_kib": rss1,
        "rss_growth_pct": round((rss1 - rss0) / rss0 * 100, 3),
        "final": idle,
        "checks": [{"name": n, "passed": ok, "detail": d} for n, ok, d in results],
        "passed": all(ok for _, ok, _ in results),
    }


def print_report(r):
    print(f"soak: {r['requests']} requests in {r['wall_s']} s")
    for kind, c in r["by_kind"].items():
        print(f"  {kind:<13} " + "  ".join(f"{k}={n}" for k, n in c.items()))
    print("  total         " + "  ".join(f"{k}={n}" for k, n in r["outcomes"].items()))
    if not any(k == "429" for k in r["outcomes"]):
        print("  note: no 429 seen; the admission limit was not reached")
    for c in r["checks"]:
        print(f"  [{'PASS' if c['passed'] else 'FAIL'}] {c['name']}: {c['detail']}")


# --- Main --------------------------------------------------------------------------------

async def max_model_len(port):
    status, body = await get(port, "/v1/models")
    if status != 200:
        raise RuntimeError(f"/v1/models answered {status}")
    return int(json.loads(body)["data"][0]["max_model_len"])


async def soak(args):
    load = Load(args, await max_model_len(args.port))
    stop = asyncio.Event()
    with open(os.path.join(args.out, "soak.csv"), "w") as csv:
        csv.write("t_s,requests_done,rss_kib,running,waiting,kv_usage\n")
        sampling = asyncio.create_task(sampler(load, csv, stop))
        warm = asyncio.create_task(warmup_rss(load))
        await asyncio.gather(*(worker(load) for _ in range(args.concurrency)))
        load.warmed.set()  # a time budget too short to have warmed up: use the RSS now
        idle = await wait_idle(args.port)
        final = await sample(load, csv)
        stop.set()
        await sampling
    rss0, rss1 = rss_windows(load.rss, await warm, final[2])
    results = checks(load, totals(load.outcomes), idle, rss0, rss1, os.path.join(args.out, "server.log"))
    return report(load, rss0, rss1, idle, results, time.monotonic() - load.started)


def rss_windows(samples, warm_sample, final_sample):
    """RSS after warm-up and at the end, each the median of its window's samples: 10-30 % of
    the load, and the last 20 % (with the final, idle sample). RSS moves by several per cent
    between two samples under load (allocator pages in and out), so two single samples would
    call noise a leak; a leak moves the whole later window. Single samples when a window is
    empty (a short soak)."""
    early = [r for p, r in samples if 0.10 <= p <= 0.30]
    late = [r for p, r in samples if p >= 0.80] + [final_sample]
    return (statistics.median(early) if early else warm_sample), statistics.median(late)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True, help="the server's process id (for its RSS)")
    p.add_argument("--out", required=True, help="folder with server.log; soak.csv and soak.json go here")
    p.add_argument("--requests", type=int, default=10000)
    p.add_argument("--minutes", type=float, default=None, help="run this long instead of --requests")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def main():
    args = parse_args()
    r = asyncio.run(soak(args))
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump(r, f, indent=2)
    print_report(r)
    return 0 if r["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
