#!/usr/bin/env python3
"""A synthetic day of LLM requests in the Azure LLM inference trace's CSV format
(TIMESTAMP,ContextTokens,GeneratedTokens), for autoscaling studies that cannot download the
real trace here. Standard library only; seeded, so the same flags give the same file.

  scripts/synthetic-day.py --mean-rate 50 --hours 24 --out day.csv [--seed 0]

The shape is stated, not fitted to the real trace:
- the rate follows the day: λ(t) = mean × (1 + amplitude × cos(2π (t − peak) / 24 h)),
  amplitude 0.6 (a trough of 0.4 × mean around 03:00, a peak of 1.6 × mean at 15:00), with
  a second, weekday-morning bump (+30 % around 10:00, two hours wide);
- within it, arrivals are burstier than Poisson: gamma-distributed gaps of shape 0.5 (a
  coefficient of variation of 1.41, where Poisson's is 1), drawn at the local rate;
- lengths are log-normal: context median 1020 tokens (σ 0.9, capped at 8000), generated
  median 180 (σ 0.8, capped at 2000), independent of each other and of time.

It prints the realised mean rate, the gaps' coefficient of variation and the peak-to-trough
ratio of the hourly rate, so a run can state what it was driven with.
"""
import argparse
import datetime
import math
import random


def rate_at(t, mean, amplitude):
    hours = t / 3600.0
    day = 1.0 + amplitude * math.cos(2 * math.pi * (hours - 15.0) / 24.0)
    morning = 0.3 * math.exp(-(((hours % 24) - 10.0) ** 2) / (2 * 1.0**2))
    return mean * (day + morning) / (1.0 + 0.3 * math.sqrt(2 * math.pi) / 24.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mean-rate", type=float, default=50.0, help="requests per second over the day")
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--amplitude", type=float, default=0.6)
    ap.add_argument("--shape", type=float, default=0.5, help="gamma shape of the gaps (1 = Poisson)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", default="2023-11-16 00:00:00")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not (a.mean_rate > 0 and a.hours > 0 and 0 <= a.amplitude < 1 and a.shape > 0):
        raise SystemExit("--mean-rate and --hours must be positive, --amplitude within 0–1, --shape positive")
    rng = random.Random(a.seed)
    start = datetime.datetime.fromisoformat(a.start)
    end = a.hours * 3600.0
    t, n, gaps, hourly = 0.0, 0, [], {}
    with open(a.out, "w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        while True:
            lam = rate_at(t, a.mean_rate, a.amplitude)
            # A gamma gap of mean 1/λ: shape k, scale 1/(k λ).
            gap = rng.gammavariate(a.shape, 1.0 / (a.shape * lam))
            t += gap
            if t >= end:
                break
            gaps.append(gap)
            ctx = min(8000, max(1, int(round(rng.lognormvariate(math.log(1020), 0.9)))))
            gen = min(2000, max(1, int(round(rng.lognormvariate(math.log(180), 0.8)))))
            stamp = start + datetime.timedelta(seconds=t)
            f.write(f"{stamp.strftime('%Y-%m-%d %H:%M:%S')}.{stamp.microsecond * 10:07d},{ctx},{gen}\n")
            hourly[int(t // 3600)] = hourly.get(int(t // 3600), 0) + 1
            n += 1
    mean_gap = sum(gaps) / len(gaps)
    cv = math.sqrt(sum((g - mean_gap) ** 2 for g in gaps) / len(gaps)) / mean_gap
    rates = [c / 3600.0 for c in hourly.values()] if a.hours >= 2 else [n / end]
    print(f"{n} requests over {a.hours} h to {a.out}: mean {n / end:.2f} req/s, gap CV {cv:.2f}, "
          f"hourly rate {min(rates):.1f}–{max(rates):.1f} req/s (peak/trough {max(rates) / max(min(rates), 1e-9):.2f})")


if __name__ == "__main__":
    main()
