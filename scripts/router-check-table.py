#!/usr/bin/env python3
"""The router check's table (scripts/router-check.sh writes its inputs): per policy, what
`goodput run` measured through sglang-router in front of the replicas (median of the repeats,
with their range) beside what `goodput plan --trace --profile` simulated.

  scripts/router-check-table.py OUT_DIR REPEATS
"""
import json
import os
import statistics
import sys


def measured(out, policy, rep):
    run = json.load(open(f"{out}/run-{policy}-{rep}/summary.json"))
    level = run["levels"][0]
    s = level["summary"]
    served = [float(x) for x in open(f"{out}/run-{policy}-{rep}.served").read().strip().split(",") if x]
    # The engine's own counts, which goodput serve returns with every response.
    cached = prompt = preempted = 0
    for line in open(f"{out}/run-{policy}-{rep}/records.jsonl"):
        engine = json.loads(line).get("engine")
        if engine:
            cached += engine["cached_tokens"]
            prompt += engine["prompt_tokens"]
            preempted += engine["preemptions"] > 0
    rate = cached / prompt if prompt else None
    return {
        "out_tok_s": s["output_throughput"],
        "ttft_p50": (s.get("ttft") or {}).get("p50"),
        "ttft_p95": (s.get("ttft") or {}).get("p95"),
        "e2e_p50": (s.get("e2e") or {}).get("p50"),
        "e2e_p95": (s.get("e2e") or {}).get("p95"),
        "hit_rate": rate,
        "preempted": preempted,
        "shares": [x / max(sum(served), 1.0) for x in served],
        "errors": s["errors"],
    }


def fmt(x, scale=1.0, digits=1):
    return "-" if x is None else f"{x * scale:.{digits}f}"


def main():
    out, repeats = sys.argv[1], int(sys.argv[2])
    # The simulated fleets router-check.sh writes: the quiet profile, the loaded one, and the
    # loaded one with the time outside the engines (older outputs have sim.json alone).
    def read(name):
        return open(f"{out}/{name}").read().strip() if os.path.exists(f"{out}/{name}") else None

    overhead, template = read("overhead-ms.txt"), read("template.txt")
    last = f"simulated, loaded + {overhead} ms outside" if overhead else "simulated"
    if template:
        last += f" + template {template}"

    kinds = [
        ("sim-quiet.json", "simulated, quiet profile"),
        ("sim-loaded.json", "simulated, loaded profile"),
        ("sim.json", last),
        ("sim-drawn.json", "simulated, loaded + each request's measured time outside"
         + (f" + template {template}" if template else "")),
    ]
    sims = [
        (label, {r["router"]: r for r in json.load(open(f"{out}/{f}"))["runs"]})
        for f, label in kinds
        if os.path.exists(f"{out}/{f}")
    ]
    names = {"round_robin": "round-robin", "cache_aware": "cache-aware"}
    p95 = {}
    print("| router | | output tok/s | TTFT P50 ms | TTFT P95 ms | E2E P50 ms | E2E P95 ms | prefix hits | preempted | replica shares |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for policy, name in names.items():
        runs = [measured(out, policy, rep) for rep in range(1, repeats + 1)]

        def med(k):
            xs = [r[k] for r in runs if r[k] is not None]
            if not xs:
                return None, None
            return statistics.median(xs), (max(xs) - min(xs))

        cells = []
        for k, scale in [("out_tok_s", 1), ("ttft_p50", 1e3), ("ttft_p95", 1e3), ("e2e_p50", 1e3), ("e2e_p95", 1e3)]:
            m, spread = med(k)
            cells.append(fmt(m, scale) + (f" (±{fmt(spread / 2, scale)})" if repeats > 1 and spread else ""))
        m, _ = med("hit_rate")
        cells.append(fmt(m, 100) + " %")
        m, _ = med("preempted")
        cells.append(fmt(m, 1, 0))
        shares = runs[0]["shares"]
        cells.append(" / ".join(f"{s * 100:.0f} %" for s in shares))
        errors = sum(r["errors"] for r in runs)
        print(f"| {name} | measured{f' ({errors} errors)' if errors else ''} | " + " | ".join(cells) + " |")
        measured_median = {k: med(k)[0] for k in ["ttft_p95", "e2e_p95"]}
        p95[name] = med("ttft_p95")
        for label, sim in sims:
            print_sim(label, name, sim[name], measured_median)
    print()
    print(ranking(p95, sims))


def ranking(p95, sims):
    """Which policy is ahead on TTFT P95, measured and simulated. The measured gap decides only
    when it exceeds the two medians' half-ranges together; otherwise it is a tie."""
    (rr, rr_range), (ca, ca_range) = p95["round-robin"], p95["cache-aware"]
    if rr is None or ca is None:
        return "Ranking on TTFT P95: not measured."
    gap, noise = (rr - ca) * 1e3, ((rr_range or 0) + (ca_range or 0)) / 2 * 1e3
    lead = lambda g: "cache-aware" if g > 0 else "round-robin"
    if abs(gap) > noise:
        said = f"measured, {lead(gap)} ahead by {abs(gap):.1f} ms (beyond the repeats' ±{noise:.1f} ms)"
    else:
        said = f"measured, a tie: {lead(gap)} ahead by {abs(gap):.1f} ms, within the repeats' ±{noise:.1f} ms"
    lines = [f"Ranking on TTFT P95: {said}."]
    for label, sim in sims:
        s_rr, s_ca = sim["round-robin"].get("ttft_p95_s"), sim["cache-aware"].get("ttft_p95_s")
        if s_rr is None or s_ca is None:
            continue
        g = (s_rr - s_ca) * 1e3
        if abs(gap) > noise:
            verdict = "the same" if (g > 0) == (gap > 0) else "reversed"
        else:
            verdict = "a tie in the measurement" if abs(g) <= noise else "decided where the measurement ties"
        lines.append(f"- {label}: {lead(g)} ahead by {abs(g):.1f} ms ({verdict})")
    return "\n".join(lines)


def with_error(sim, measured):
    """The simulated figure in ms, with its error against the measured one."""
    if sim is None or not measured:
        return fmt(sim, 1e3)
    return f"{sim * 1e3:.1f} ({(sim / measured - 1) * 100:+.0f} %)"


def print_sim(label, name, s, measured):
    sim_cells = [
        fmt(s.get("output_throughput")),
        fmt(s.get("ttft_p50_s"), 1e3),
        with_error(s.get("ttft_p95_s"), measured["ttft_p95"]),
        fmt(s.get("e2e_p50_s"), 1e3),
        with_error(s.get("e2e_p95_s"), measured["e2e_p95"]),
        fmt(s.get("prefix_hit_rate"), 100) + " %",
        fmt(s.get("preempted"), 1, 0),
        " / ".join(f"{x * 100:.0f} %" for x in s["replica_shares"]),
    ]
    print(f"| {name} | {label} | " + " | ".join(sim_cells) + " |")


if __name__ == "__main__":
    main()
