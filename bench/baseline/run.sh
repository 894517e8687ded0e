#!/usr/bin/env bash
# Time PyTorch's own tools on snapshot files, for side-by-side figures with gpumem.
#
# usage: bench/baseline/run.sh FILE...
#
# For each FILE and each tool it prints one JSON line on stdout:
#   {"file","bytes","tool","wall_s","max_rss_mb","rc", ...tool's own fields}
# tools (pick with TOOLS="pickle stats viewer", the default, in that order):
#   pickle  python3 pickle.load only (the floor for anything written in Python)
#           own fields: load_s
#   stats   PyTorch's `_memory_viz.py stats` (pickle.load + segsum) through
#           bench/baseline/run_memory_viz.py; own fields: load_s, segsum_s, total_s
#   viewer  PyTorch's memory_viz viewer pipeline in node, no drawing
#           (../shared/tools/memoryviz_bench.mjs); own fields: unpickle_ms,
#           annotate_ms, process_ms, total_ms, elements, timesteps, peak_bytes, rss_mb
# wall_s, cpu_s (user + system) and max_rss_mb come from /usr/bin/time -v around the
# whole process (interpreter start-up included). Runs one at a time under `nice -n $NICE`.
# On a busy shared machine wall_s swings by 2x between runs; cpu_s much less.
#
# environment: TOOLS, NICE (10), PYTHON (python3), NODE (node), NODE_HEAP_MB (16000),
#   PYTORCH_DIR (repo/../shared/reference/pytorch-viz: MemoryViz.js, process_alloc_data.js, _memory_viz.py),
#   SHARED (repo/../shared), DEVICE (viewer device; default: the longest trace),
#   REPEAT (1: runs of each tool per file; every run gets its own line with "run": i)
# Each line also has "loadavg1", the 1-minute load average when the run started: this
# machine is shared, so compare figures taken at similar load (or take the minimum).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
TOOLS=${TOOLS:-"pickle stats viewer"}
NICE=${NICE:-10}
PYTHON=${PYTHON:-python3}
NODE=${NODE:-node}
NODE_HEAP_MB=${NODE_HEAP_MB:-16000}
PYTORCH_DIR=${PYTORCH_DIR:-$repo/../shared/reference/pytorch-viz}
SHARED=${SHARED:-$repo/../shared}
DEVICE=${DEVICE:-}
REPEAT=${REPEAT:-1}

if [ $# -eq 0 ]; then
  echo "usage: $0 FILE..." >&2
  exit 2
fi
if [ ! -x /usr/bin/time ]; then
  echo "run.sh: /usr/bin/time missing (apt-get install -y time)" >&2
  exit 1
fi
for f in MemoryViz.js process_alloc_data.js _memory_viz.py; do
  if [ ! -f "$PYTORCH_DIR/$f" ]; then
    echo "run.sh: $PYTORCH_DIR/$f missing; see bench/baseline/README.md" >&2
    exit 1
  fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run_one TOOL FILE CMD...: run CMD under /usr/bin/time -v and print the JSON line.
run_one() {
  local tool=$1 file=$2 run=$3
  shift 3
  local rc=0 load
  load=$(cut -d' ' -f1 /proc/loadavg)
  nice -n "$NICE" /usr/bin/time -v -o "$tmp/time" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  "$PYTHON" - "$tool" "$file" "$rc" "$tmp/time" "$tmp/out" "$tmp/err" "$run" "$load" <<'EOF'
import json, os, sys
tool, path, rc, time_f, out_f, err_f, run, load = sys.argv[1:]
rec = {"file": os.path.basename(path), "bytes": os.path.getsize(path), "tool": tool,
       "run": int(run), "loadavg1": float(load)}
wall = rss = None
cpu = 0.0
for line in open(time_f, errors="replace"):
    line = line.strip()
    if line.startswith(("User time (seconds)", "System time (seconds)")):
        cpu += float(line.rsplit(": ", 1)[1])
    elif line.startswith("Elapsed (wall clock) time"):
        secs = 0.0
        for part in line.rsplit(": ", 1)[1].split(":"):
            secs = secs * 60 + float(part)
        wall = round(secs, 2)
    elif line.startswith("Maximum resident set size"):
        rss = round(int(line.rsplit(": ", 1)[1]) / 1024)
rec.update(wall_s=wall, cpu_s=round(cpu, 2), max_rss_mb=rss, rc=int(rc))
# The tool's own JSON line: last line of stdout (pickle, viewer) or stderr (stats).
for f in (out_f, err_f):
    lines = [l for l in open(f, errors="replace").read().splitlines() if l.startswith("{")]
    if lines:
        try:
            rec.update(json.loads(lines[-1]))
        except ValueError:
            pass
        break
rec["file"] = os.path.basename(path)
if int(rc) != 0:
    tail = open(err_f, errors="replace").read().strip().splitlines()[-3:]
    rec["error"] = " | ".join(tail)
print(json.dumps(rec), flush=True)
EOF
}

pickle_only='import json, pickle, sys, time
t0 = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    pickle.load(f)
print(json.dumps({"load_s": round(time.perf_counter() - t0, 4)}))'

for file in "$@"; do
  if [ ! -f "$file" ]; then
    echo "run.sh: $file: no such file" >&2
    exit 1
  fi
  for tool in $TOOLS; do
    for run in $(seq 1 "$REPEAT"); do
      case $tool in
        pickle) run_one pickle "$file" "$run" "$PYTHON" -c "$pickle_only" "$file" ;;
        stats)  run_one stats "$file" "$run" "$PYTHON" "$here/run_memory_viz.py" --quiet \
                  --viz "$PYTORCH_DIR/_memory_viz.py" "$file" ;;
        viewer) run_one viewer "$file" "$run" "$NODE" --max-old-space-size="$NODE_HEAP_MB" \
                  "$SHARED/tools/memoryviz_bench.mjs" "$PYTORCH_DIR" "$file" ${DEVICE:+"$DEVICE"} ;;
        *) echo "run.sh: unknown tool $tool (want pickle, stats, viewer)" >&2; exit 2 ;;
      esac
    done
  done
done
