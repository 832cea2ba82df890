#!/usr/bin/env bash
# Lab experiment (not a product benchmark): why the harness's own steps around triton_nvfp4's timed calls
# are slow on the H200 (copying an output to the host: 113 ms in a ranked run, 0.6 ms in one plain
# process, bench/lab/chunk_costs.py). One-block ranked runs of 10 samples a shape, each changing one
# thing: the submission's PDL chain off, another nvfp4 submission, an mxfp4 one; each run's JSON has the
# worker's timing.* split. Writes into DIR (default $OUT, else /tmp/slow_steps).
set -u
DIR=${1:-${OUT:-/tmp/slow_steps}}
mkdir -p "$DIR"
sed 's/^_PDL = not _INTERP and/_PDL = False and not _INTERP and/' submissions/triton_nvfp4.py > "$DIR/triton_nvfp4_nopdl.py"
grep -q "^_PDL = False" "$DIR/triton_nvfp4_nopdl.py" || { echo "the PDL switch moved in triton_nvfp4.py" >&2; exit 2; }
for v in "pdl:submissions/triton_nvfp4.py:nvfp4_gemm" "nopdl:$DIR/triton_nvfp4_nopdl.py:nvfp4_gemm" \
         "torch_nvfp4:submissions/torch_nvfp4.py:nvfp4_gemm" "triton_mxfp4:submissions/triton_mxfp4.py:mxfp4_mm"; do
  IFS=: read -r name file task <<< "$v"
  # which process keeps the SMs busy meanwhile: per-process SM use once a second, and who is who (ps)
  pmon=""
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi pmon -s u -d 1 -c 100 > "$DIR/$name.pmon.txt" 2>&1 &
    pmon=$!
  fi
  HARNESS_SECRET_SEED="slow-steps-$name" timeout 110 python -m harness run "$file" --task "$task" --mode leaderboard \
    --blocks 1 --max-repeats 10 --no-kernel-only --json "$DIR/$name.json" --quiet > "$DIR/$name.log" 2>&1 &
  run=$!
  sleep 12; ps -eo pid,ppid,user,etimes,args > "$DIR/$name.ps.txt"
  wait "$run"
  [ -n "$pmon" ] && kill "$pmon" 2>/dev/null
  python - "$DIR/$name.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
phases = {k: round(v, 2) for k, v in sorted(d["phases_s"].items(), key=lambda kv: -kv[1]) if v >= 0.01}
print(sys.argv[1], d["verdict"], round(d["score_us"] or 0, 3), phases)
PY
done
python bench/lab/chunk_costs.py --task nvfp4_gemm --submission submissions/triton_nvfp4.py --hide > "$DIR/probe_nvfp4.txt" 2>&1
cat "$DIR/probe_nvfp4.txt"
