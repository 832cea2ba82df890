#!/usr/bin/env bash
# The H200 validation, in stages that each fit one device call (run from the repository root there).
# Every number it produces lands in results/ (written by the scripts, never typed in) and, on the
# device tool, in $OUT/results.tar.
#   bash scripts/h200_validation.sh a    # peaks, reference, examples, protocol cross-check, all modes
#   bash scripts/h200_validation.sh b    # timing trust, anti-cheat GPU tests, defense overhead
set -u
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
R=results
RUNS=$R/h200_runs
mkdir -p "$RUNS"
stage=${1:?stage a or b}
step() { echo "=== $* ($(date -u +%H:%M:%S))" >&2; }

if [ "$stage" = a ]; then
  step peaks;      $PY scripts/measure_peaks.py --out $R/device_peaks.json | tail -3
  step reference;  $PY scripts/validate_reference_gpu.py --out $R/h200_reference.json
  step examples;   $PY scripts/bench_examples.py --out $R/h200_examples.json --markdown $R/h200_leaderboard.md \
    --runs-dir $RUNS >/dev/null
  for s in torch_mxfp4 triton_mxfp4; do
    step "$s cross-check"
    $PY scripts/crosscheck_protocol.py submissions/$s.py --harness-json $RUNS/$s.json --out $R/h200_crosscheck_$s.json
  done
  for s in torch_mxfp4 triton_mxfp4 torch_nvfp4 triton_nvfp4; do
    task=mxfp4_mm; case $s in *nvfp4*) task=nvfp4_gemm;; esac
    for mode in leaderboard profile; do
      step "$s $mode"
      HARNESS_SECRET_SEED=h200-validation $PY -m harness run submissions/$s.py --task $task --mode $mode \
        --max-repeats 30 --json $RUNS/$s.$mode.json --quiet | tail -2
    done
  done
fi
if [ "$stage" = b ]; then
  step "GPU tests"; $PY -m pytest -q -m gpu -p no:cacheprovider --junitxml=$R/h200_gpu_tests.xml 2>&1 | tail -15
  [ -f scripts/validate_timing.py ] && { step timing; $PY scripts/validate_timing.py --out $R/h200_timing.json; }
  [ -f scripts/defense_overhead.py ] && { step defenses; $PY scripts/defense_overhead.py --out $R/h200_defense_overhead.json; }
fi
step done
[ -n "${OUT:-}" ] && tar -cf "$OUT/results-$stage.tar" $R
exit 0
