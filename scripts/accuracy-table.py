#!/usr/bin/env python3
"""The accuracy table of scripts/accuracy.sh: per metric, each level's error
(predicted ÷ measured − 1, median over the repeats), the MAPE over the levels (mean of the
absolute median errors; also over the levels every repeat measured, when a sweep's refinement
added levels to some repeats only), and the run-to-run spread of the measurement ((max − min) ÷ median
over the repeats, median over the levels) — the machine's own noise, which bounds how well any
prediction can do.

  scripts/accuracy-table.py OUT_DIR REPEATS [--check]

With --check the twins are read from each run's prediction.json (what `goodput plan --check
RUN --profile P` writes: the same measured runs against another profile) instead of the
run's own `--predict` twin.
"""
import json
import statistics
import sys

METRICS = [
    ("output throughput", lambda s: s.get("output_throughput")),
    ("TTFT P95", lambda s: (s.get("ttft") or {}).get("p95")),
    ("TPOT P95", lambda s: (s.get("tpot") or {}).get("p95")),
    ("E2E P95", lambda s: (s.get("e2e") or {}).get("p95")),
]


def main():
    out, repeats = sys.argv[1], int(sys.argv[2])
    runs = [json.load(open(f"{out}/run-{r}/summary.json")) for r in range(1, repeats + 1)]
    if "--check" in sys.argv[3:]:
        for r, run in enumerate(runs, 1):
            run["prediction"] = json.load(open(f"{out}/run-{r}/prediction.json"))
    # Every level any repeat measured (a sweep refines between levels where its own
    # capacity falls, so repeats can differ), in order.
    loads = sorted({l["summary"]["load"] for run in runs for l in run["levels"]})
    every = [x for x in loads if all(any(l["summary"]["load"] == x for l in run["levels"]) for run in runs)]
    print(f"levels {loads}, {repeats} repeats; error = predicted ÷ measured − 1 (median over repeats)")
    common = "" if every == loads else " | MAPE, levels of every repeat"
    print("| metric | " + " | ".join(f"{x:g}" for x in loads) + f" | MAPE{common} | run-to-run spread |")
    print("|---|" + "---|" * (len(loads) + 2 + bool(common)))
    for name, get in METRICS:
        errors, spreads = [], []
        for load in loads:
            measured, predicted = [], []
            for run in runs:
                m = next((l for l in run["levels"] if l["summary"]["load"] == load), None)
                p = next((l for l in (run.get("prediction") or {}).get("levels", []) if l["summary"]["load"] == load), None)
                if m and p and get(m["summary"]) and get(p["summary"]) is not None:
                    measured.append(get(m["summary"]))
                    predicted.append(get(p["summary"]))
            if not measured:
                errors.append(None)
                continue
            errors.append(statistics.median(p / m - 1 for p, m in zip(predicted, measured)))
            if len(measured) > 1:
                spreads.append((max(measured) - min(measured)) / statistics.median(measured))
        def mape(among):
            known = [abs(e) for x, e in zip(loads, errors) if e is not None and x in among]
            return f"{statistics.mean(known) * 100:.0f} %" if known else "-"

        spread = f"{statistics.median(spreads) * 100:.0f} %" if spreads else "-"
        cells = ["-" if e is None else f"{e * 100:+.0f} %" for e in errors]
        both = f" | {mape(every)}" if common else ""
        print(f"| {name} | " + " | ".join(cells) + f" | {mape(loads)}{both} | {spread} |")


if __name__ == "__main__":
    main()
