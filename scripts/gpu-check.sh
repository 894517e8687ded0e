#!/usr/bin/env bash
# gpu-check.sh: checks `gpumem record` end to end on a machine with an
# NVIDIA GPU and PyTorch >= 2.1 (what no CI machine has): trains a tiny
# model under `gpumem record --step 3 --monitor --at-exit`, then checks
# with gpumem itself that
#   - the job's output and exit status came through,
#   - rank0-step3.pickle and rank0-exit.pickle exist, open, and hold
#     traces whose entries carry stacks from the training script,
#   - the monitor's interval peaks reset (step 2's spike is not in step 3's
#     peak), and `gpumem steps` calls step 2 a jump,
#   - an induced OOM (one allocation larger than the card) wrote
#     rank0-oom.pickle before the error ended the job, and `gpumem oom`
#     says "shortage".
#
# usage: scripts/gpu-check.sh
# env:   GPUMEM (the binary; default: gpumem on PATH, else built with go),
#        PYTHON (default python3), CUDA_VISIBLE_DEVICES as usual.
# Exit status 0 when every check passes; the work directory is kept on
# failure.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpumem-gpu-check.XXXXXX")
fails=0
ok() { printf 'ok    %s\n' "$*"; }
bad() { printf 'FAIL  %s\n' "$*"; fails=$((fails + 1)); }
die() { printf 'gpu-check: %s\n' "$*" >&2; exit 2; }

if [[ -n "${GPUMEM:-}" ]]; then
  gpumem=$GPUMEM
elif command -v gpumem >/dev/null 2>&1; then
  gpumem=$(command -v gpumem)
elif command -v go >/dev/null 2>&1; then
  gpumem=$work/gpumem
  go build -o "$gpumem" ./cmd/gpumem || die "go build failed"
else
  die "no gpumem binary: set GPUMEM, put gpumem on PATH, or install Go"
fi
"$gpumem" version >"$work/version" || die "$gpumem does not run"
head -1 "$work/version"

"$PYTHON" - <<'EOF' || die "$PYTHON: needs PyTorch >= 2.1 with CUDA and a visible GPU"
import sys, torch
v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
print("torch", torch.__version__, "cuda", torch.version.cuda, "on", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")
sys.exit(0 if torch.cuda.is_available() and v >= (2, 1) else 1)
EOF

# --- 1. a tiny training run -------------------------------------------------
cat >"$work/train.py" <<'EOF'
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024, device="cuda")
for step in range(1, 7):
    opt.zero_grad(set_to_none=True)
    spike = torch.empty(256 << 20, dtype=torch.uint8, device="cuda") if step == 2 else None  # 256 MiB in step 2 only
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    del spike
torch.cuda.synchronize()
print("final loss %.4f" % loss.item())
EOF
snaps=$work/snaps
set +e
"$gpumem" record --dir "$snaps" --step 3 --monitor --at-exit -- "$PYTHON" "$work/train.py" >"$work/train.out" 2>"$work/train.err"
code=$?
set -e
[[ $code == 0 ]] && ok "training run exited 0" || bad "training run exited $code (see $work/train.err)"
grep -q '^final loss ' "$work/train.out" && ok "the job's stdout came through" || bad "no 'final loss' line in the job's stdout"
grep -q 'rank0-step3.pickle' "$work/train.err" && ok "the summary lists rank0-step3.pickle" || bad "summary: $(cat "$work/train.err")"
if grep '^gpumem:' "$work/train.err"; then bad "the recorder warned (above)"; else ok "no recorder warning"; fi

for f in rank0-step3.pickle rank0-exit.pickle; do
  p=$snaps/$f
  if [[ ! -s $p ]]; then bad "$f missing"; continue; fi
  if ! "$gpumem" info --json "$p" >"$work/$f.json" 2>"$work/$f.err"; then bad "$f does not open: $(cat "$work/$f.err")"; continue; fi
  if "$PYTHON" - "$work/$f.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))["devices"]
ok = [x for x in d if x["trace_entries"] > 0 and x["entries_with_stack"] > 0]
print("  trace entries %s, with stacks %s" % ([x["trace_entries"] for x in d], [x["entries_with_stack"] for x in d]))
sys.exit(0 if ok else 1)
EOF
  then ok "$f opens and has a trace with stacks"; else bad "$f has no trace entries with stacks"; fi
  # (to a file first: grep -q leaving early would fail the pipeline under pipefail)
  "$gpumem" peak "$p" >"$work/$f.peak" 2>&1 || true
  if grep -q 'train\.py' "$work/$f.peak"; then ok "$f: the peak's sites are in train.py"; else bad "$f: gpumem peak names no train.py frame"; fi
done

mon=$snaps/rank0-steps.jsonl
if [[ -s $mon ]] && "$gpumem" steps --json "$mon" >"$work/steps.json"; then
  if "$PYTHON" - "$work/steps.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
peaks = {r["step"]: r["peak_allocated_bytes"] for r in s["reports"]}
print("  interval peaks (MiB):", {k: v >> 20 for k, v in sorted(peaks.items())})
spike = 256 << 20
# Reset: step 2's peak holds the spike, step 3's (after the reset) does not.
ok = sorted(peaks) == [1, 2, 3, 4, 5, 6] and peaks[2] >= peaks[3] + spike // 2 and abs(peaks[3] - peaks[4]) < spike // 4
jumps = [j["step"] for j in s["peak_jumps"]]
print("  jumps:", jumps)
sys.exit(0 if ok and 2 in jumps else 1)
EOF
  then ok "the monitor's interval peaks reset; step 2 is a jump"; else bad "the monitor's interval peaks do not reset as expected"; fi
else
  bad "no monitor file, or gpumem steps cannot read it"
fi

# --- 2. an induced OOM ------------------------------------------------------
cat >"$work/oom.py" <<'EOF'
import torch

keep = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
total = torch.cuda.get_device_properties(0).total_memory
print("allocating", 2 * total, "bytes on a", total, "byte card", flush=True)
too_big = torch.empty(2 * total, dtype=torch.uint8, device="cuda")  # raises OutOfMemoryError
EOF
oomdir=$work/oom
set +e
"$gpumem" record --dir "$oomdir" -- "$PYTHON" "$work/oom.py" >"$work/oom.out" 2>"$work/oom.err"
code=$?
set -e
[[ $code == 1 ]] && ok "the OOM job's exit status (1) came through" || bad "the OOM job exited $code, want 1 (see $work/oom.err)"
grep -q 'OutOfMemoryError' "$work/oom.err" && ok "the job's OutOfMemoryError reached stderr" || bad "no OutOfMemoryError in the job's stderr"
if [[ -s $oomdir/rank0-oom.pickle ]]; then
  ok "rank0-oom.pickle written"
  verdict=$("$gpumem" oom --json "$oomdir/rank0-oom.pickle" | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["verdict"])' || true)
  [[ $verdict == shortage ]] && ok "gpumem oom: shortage" || bad "gpumem oom verdict: '$verdict', want shortage"
else
  bad "no rank0-oom.pickle (summary: $(cat "$work/oom.err" | tail -3))"
fi

if ((fails)); then
  printf '\n%d check(s) failed; files in %s\n' "$fails" "$work"
  exit 1
fi
rm -rf "$work"
printf '\nall checks passed\n'
