#!/usr/bin/env python3
"""Turn run.sh's JSON lines into a markdown table, one row per file and tool.

usage: summarize.py RESULTS.jsonl...

Columns: file size, runs, wall and CPU (user + system) seconds (min and median
over runs), peak RSS
(max over runs), RSS / file size, and the tool's own stage times (from the
fastest run). Runs that failed (rc != 0) are counted apart and left out.
"""

import json
import statistics
import sys
from collections import defaultdict

TOOLS = ("pickle", "stats", "viewer")


def stages(r):
    if r["tool"] == "pickle":
        return f"load {r['load_s']:.2f} s"
    if r["tool"] == "stats":
        return f"load {r['load_s']:.2f} s + segsum {r['segsum_s']:.2f} s"
    return (f"unpickle {r['unpickle_ms'] / 1000:.1f} s + annotate {r['annotate_ms'] / 1000:.1f} s"
            f" + process {r['process_ms'] / 1000:.1f} s; peak {r['peak_bytes']}")


def main():
    runs = defaultdict(list)
    failed = defaultdict(int)
    for path in sys.argv[1:]:
        for line in open(path):
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r["rc"] != 0:
                failed[(r["file"], r["tool"])] += 1
            else:
                runs[(r["file"], r["tool"])].append(r)
    print("| file | MB | tool | runs | wall s (min / median) | CPU s (min / median) | peak RSS MB | RSS / file"
          " | stages (fastest run) | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted(set(runs) | set(failed),
                  key=lambda k: (min((r["bytes"] for r in runs.get(k, [])), default=0), k[0],
                                 TOOLS.index(k[1]) if k[1] in TOOLS else 9))
    for key in keys:
        rs = runs.get(key, [])
        if not rs:
            print(f"| {key[0]} | | {key[1]} | 0 ({failed[key]} failed) | | | | | | |")
            continue
        walls = [r["wall_s"] for r in rs]
        cpus = [r["cpu_s"] for r in rs if "cpu_s" in r]
        cpu = f"{min(cpus):.2f} / {statistics.median(cpus):.2f}" if cpus else ""
        best = min(rs, key=lambda r: r["wall_s"])
        rss = max(r["max_rss_mb"] for r in rs)
        mb = rs[0]["bytes"] / 1e6
        loads = [r.get("loadavg1") for r in rs if r.get("loadavg1") is not None]
        load = f"{min(loads):.1f}–{max(loads):.1f}" if loads else ""
        n = f"{len(rs)}" + (f" (+{failed[key]} failed)" if failed.get(key) else "")
        print(f"| {key[0]} | {mb:.1f} | {key[1]} | {n} | {min(walls):.2f} / {statistics.median(walls):.2f}"
              f" | {cpu} | {rss} | {rss / mb:.1f}× | {stages(best)} | {load} |")


if __name__ == "__main__":
    main()
