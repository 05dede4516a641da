#!/usr/bin/env python3
"""The soak's second part: `goodput run --metrics-port` against the soaked server while scrapers
hold its metrics port the ways that used to keep a finished run alive: one sends half a request
head and waits, one sends 64 requests and never reads their answers, one opens a connection and
sends nothing, and a well-behaved one scrapes every 50 ms. Checks that the run completes
(exit 0, summary complete), that it exits within 5 s of its summary being written, that the
polite scraper was served, and that nothing panicked.

Usage: soak-metrics.py --binary PATH --port SERVE_PORT --out DIR [--requests N]
Writes DIR/metrics-soak.json; exit 0 when every check passes, 1 when one fails.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(port, deadline):
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def hostile(port, held):
    """The three connections that never finish a scrape; kept open until the run is gone."""
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    silent = socket.create_connection(("127.0.0.1", port))
    greedy = socket.create_connection(("127.0.0.1", port))
    greedy.setblocking(False)
    ask = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 64
    end = time.time() + 1.0
    while time.time() < end:
        try:
            greedy.send(ask)
        except (BlockingIOError, OSError):
            break
    held.extend([half, silent, greedy])


def polite(port, stop, served):
    while not stop.is_set():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                if r.status == 200 and b"goodput_run_level" in r.read():
                    served[0] += 1
        except OSError:
            pass
        time.sleep(0.05)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--requests", type=int, default=60)
    a = p.parse_args()
    metrics = free_port()
    run_dir = os.path.join(a.out, "run")
    cmd = [a.binary, "run", "--target", f"http://127.0.0.1:{a.port}", "--served-model-name", "tiny",
           "--model", "tiny", "--rate", "20", "--requests", str(a.requests), "--refine", "0", "-q",
           "--metrics-port", str(metrics), "--out", run_dir]
    log = open(os.path.join(a.out, "run.log"), "w")
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    held, served, stop = [], [0], threading.Event()
    if not wait_for(metrics, started + 60):
        proc.kill()
        print("soak-metrics: the metrics port never opened", file=sys.stderr)
        return 2
    hostile(metrics, held)
    scraper = threading.Thread(target=polite, args=(metrics, stop, served), daemon=True)
    scraper.start()
    summary = os.path.join(run_dir, "summary.json")
    completed_at = None
    while proc.poll() is None and time.time() < started + 300:
        if completed_at is None and os.path.exists(summary):
            try:
                if json.load(open(summary)).get("complete"):
                    completed_at = time.time()
            except (OSError, ValueError):
                pass
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
    code = proc.wait()
    exited_at = time.time()
    stop.set()
    for s in held:
        s.close()
    log.close()
    tail = open(os.path.join(a.out, "run.log")).read()
    lag = None if completed_at is None else round(exited_at - completed_at, 2)
    checks = [
        {"name": "the run completes (exit 0, summary complete)", "passed": code == 0 and completed_at is not None,
         "detail": f"exit {code}, complete summary seen: {completed_at is not None}"},
        {"name": "exits within 5 s of its summary, scrapers holding the port", "passed": lag is not None and lag < 5,
         "detail": f"{lag} s after the summary was complete"},
        {"name": "a polite scraper is served meanwhile", "passed": served[0] > 0, "detail": f"{served[0]} scrapes"},
        {"name": "no panic", "passed": "panicked" not in tail, "detail": "run.log"},
    ]
    report = {"command": cmd, "seconds": round(exited_at - started, 2), "checks": checks,
              "passed": all(c["passed"] for c in checks)}
    json.dump(report, open(os.path.join(a.out, "metrics-soak.json"), "w"), indent=2)
    for c in checks:
        print(f"  [{'PASS' if c['passed'] else 'FAIL'}] {c['name']}: {c['detail']}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
