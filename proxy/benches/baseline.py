#!/usr/bin/env python3
"""The committed bench baseline (benches/baseline/): save it, restore it, compare with it.

  cargo bench --bench routing --bench headers --bench telemetry -- --save-baseline main
  python3 benches/baseline.py save      # copy criterion's "main" baseline into benches/baseline/
  python3 benches/baseline.py restore   # put it back into target/criterion/ (a fresh clone has none),
  cargo bench --bench routing --bench headers --bench telemetry -- --baseline main   # then criterion compares with it
  python3 benches/baseline.py compare   # or: committed medians next to the last run's, by hand

Only the standard library; run from anywhere.
"""

import datetime
import json
import os
import platform
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CRITERION = os.path.join(HERE, "..", "target", "criterion")
STORE = os.path.join(HERE, "baseline", "criterion")
SUMMARY = os.path.join(HERE, "baseline", "summary.json")
NAME = "main"
FILES = ("benchmark.json", "estimates.json", "sample.json", "tukey.json")


def runs(root, kind):
    """(relative dir of the bench, full id, median ns) of each `kind` run under root."""
    found = []
    for d, _, files in os.walk(root):
        if os.path.basename(d) != kind or "estimates.json" not in files:
            continue
        with open(os.path.join(d, "benchmark.json")) as f:
            full_id = json.load(f)["full_id"]
        with open(os.path.join(d, "estimates.json")) as f:
            median = json.load(f)["median"]["point_estimate"]
        found.append((os.path.relpath(os.path.dirname(d), root), full_id, median))
    return sorted(found, key=lambda r: r[1])


def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{os.cpu_count()} cores, {cpu}, {platform.system()} {platform.release()}, {rustc}; shared and noisy"


def save():
    found = runs(CRITERION, NAME)
    if not found:
        sys.exit(f"no '{NAME}' baseline under {CRITERION}: run cargo bench -- --save-baseline {NAME} first")
    shutil.rmtree(STORE, ignore_errors=True)
    for rel, _, _ in found:
        os.makedirs(os.path.join(STORE, rel, NAME))
        for f in FILES:
            shutil.copy(os.path.join(CRITERION, rel, NAME, f), os.path.join(STORE, rel, NAME, f))
    summary = {
        "baseline": NAME,
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "median_ns": {full_id: round(median, 1) for _, full_id, median in found},
    }
    with open(SUMMARY, "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(f"saved {len(found)} benches to {os.path.relpath(STORE)} and {os.path.relpath(SUMMARY)}")


def restore():
    n = 0
    for rel, _, _ in runs(STORE, NAME):
        dst = os.path.join(CRITERION, rel, NAME)
        os.makedirs(dst, exist_ok=True)
        for f in FILES:
            shutil.copy(os.path.join(STORE, rel, NAME, f), os.path.join(dst, f))
        n += 1
    print(f"restored {n} benches into {os.path.relpath(CRITERION)}; now: cargo bench -- --baseline {NAME}")


def compare():
    with open(SUMMARY) as f:
        summary = json.load(f)
    current = {full_id: median for _, full_id, median in runs(CRITERION, "new")}
    print(f"baseline of {summary['date']} on {summary['machine']}")
    print(f"{'bench':<56} {'baseline ns':>12} {'now ns':>12} {'change':>8}")
    for full_id, base in summary["median_ns"].items():
        now = current.get(full_id)
        if now is None:
            print(f"{full_id:<56} {base:>12.1f} {'-':>12} {'not run':>8}")
            continue
        print(f"{full_id:<56} {base:>12.1f} {now:>12.1f} {100 * (now - base) / base:>+7.1f}%")
    for full_id, now in sorted(current.items()):
        if full_id not in summary["median_ns"]:
            print(f"{full_id:<56} {'-':>12} {now:>12.1f} {'new':>8}")
    print("(medians; on this shared 2-core machine differences under ~10% are noise)")


if __name__ == "__main__":
    commands = {"save": save, "restore": restore, "compare": compare}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]]()
