#!/usr/bin/env bash
# The H200 validation, in stages that each fit one device call (run from the repository root).
# Every number lands in results/ (written by the scripts, never typed in) and, on the device tool,
# in $OUT/results-<stage>.tar. Each step has its own time limit, so one stuck step cannot eat the call.
# The stages that time verdicts, run-alls, boards and finals write to the files of the GPU that came
# (results/h100_verdicts/... on an H100, lent when an H200 was asked for); the others are the H200's.
#   bash bench/h200_validation.sh a   # examples + leaderboard table, protocol cross-check, all modes
#   bash bench/h200_validation.sh b   # timing trust (kernel-only, repeatability, wall time), defense overhead
#   bash bench/h200_validation.sh checks       # the GPU-marked tests but the runs and the docs (JUnit XML)
#   bash bench/h200_validation.sh checks-runs  # the examples' GPU runs (tests/test_gpu_runs.py)
#   bash bench/h200_validation.sh checks-docs  # the documented commands that need a GPU
#   bash bench/h200_validation.sh verdicts     # issue 49: whole-process verdict times through a verdict
#                       # server and in processes of their own, and the parent's per-call costs
#   bash bench/h200_validation.sh run-all      # issue 49: ranked run-alls (up to 4, one file) of 10 byte-different
#                       # copies of triton_mxfp4, each new to the compile cache (the target: 80 s)
#   BASE=DIR BASE_COMMIT=SHA bash bench/h200_validation.sh run-all-ab   # issue 49: that run-all from this
#                       # tree and from a copy of another commit (git archive SHA | tar -x -C DIR), 2 rounds,
#                       # added to the GPU's own results/GPU_verdicts/run_all_ab.json (--resume)
#   bash bench/h200_validation.sh lead-in-mxfp4   # issue 49: the short lead-in (the default) against
#   bash bench/h200_validation.sh lead-in-nvfp4   # chunk (bench/lead_in.py: interleaved whole ranked runs)
#   bash bench/h200_validation.sh boards       # issue 50: nvfp4 boards of identical copies under block
#                       # rule 2 and the default lead-in, resumed from results/ranks/ (the GPU's own file)
#                       # (BOARDS_BUDGET=S for a shorter call: the device call's limit must exceed S + 40)
#   bash bench/h200_validation.sh finals       # issue 50: nvfp4 final scorings of the file, a copy and a variant
#                       # 4% slower, calibrated from that boards file, resumed from results/ranks/ (BOARDS_BUDGET too;
#                       # in a new file the variant's slowdown is measured first, by 3 pairs of ranked runs;
#                       # FINAL_ROUNDS=R: up to R rounds a final, in a file of their own unless R is 10)
#   bash bench/h200_validation.sh escape       # (logs/ only) the escaped-work check on this host:
#                       # whole-process ranked runs of triton_mxfp4, a fresh compile cache each, with the
#                       # series the check reads (an H100 rejected some of these before blocks measured again)
#   bash bench/h200_validation.sh ranked [example ...]  # honest ranked runs with the device-clock
#                       # check (mxfp4: the gate holds; nvfp4: its short cap opens it by itself); the
#                       # examples named after the stage only (default: all three)
# (harness/data/device_peaks.json and results/h200_reference.json come from
#  'python -m harness measure-peaks --out harness/data/device_peaks.json' and
#  bench/validate_reference_gpu.py, run on their own.)
set -u
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
R=results
RUNS=$R/h200_runs
mkdir -p "$RUNS"
stage=${1:?stage smoke, a, b, checks, checks-runs, checks-docs, verdicts, run-all, run-all-ab, lead-in-mxfp4, lead-in-nvfp4, boards, finals, escape or ranked}
LOGS=$R/logs
mkdir -p "$LOGS"
# Each step first saves what the earlier ones wrote: a call cut short by the device's limit still
# returns them. Output goes to log files, not pipes (a pipe stays open while a killed step's
# children live, and the call then hangs to its limit).
step() {
  [ -n "${OUT:-}" ] && tar -cf "$OUT/results-$stage.tar" $R 2>/dev/null
  echo "=== $* ($(date -u +%H:%M:%S))" >&2
}

gpu_slug() {   # h200, h100; another GPU: its name, as a slug
  local gpu dev
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  dev=$(echo "$gpu" | grep -o 'H[0-9]00' | tr H h)
  echo "${dev:-$(printf %s "$gpu" | tr -cs 'A-Za-z0-9' '-' | tr A-Z a-z)}"
}
if [ "$stage" = smoke ]; then   # a few minutes: the launch gate and one example per task
  step "launch gate"
  timeout 60 $PY -c "import torch; from harness.worker.sampler import Sampler; from harness.engine.device import device_info as d; \
s = Sampler(torch.device('cuda'), d(torch.device('cuda')).l2_bytes, 64 << 30); print(s.method)"
  step "GPU gate tests"
  timeout 150 $PY -m pytest -q -m gpu -p no:cacheprovider tests/test_timing_trust.py tests/adversarial \
    -k "gate or side_stream or rerecording" 2>&1 | tail -15
  for pair in triton_mxfp4:mxfp4_mm triton_nvfp4:nvfp4_gemm; do
    step "${pair%%:*} benchmark"
    timeout 150 $PY -m harness run submissions/${pair%%:*}.py --task ${pair##*:} --mode benchmark --max-repeats 30 \
      --verify-timing --json $LOGS/smoke_${pair%%:*}.json --quiet 2>&1 | grep -v "^\[harness\]" | tail -14
  done
fi
if [ "$stage" = a ]; then
  step examples
  timeout 330 $PY bench/bench_examples.py --out $R/h200_examples.json --markdown $LOGS/h200_leaderboard.md \
    --runs-dir $RUNS >/dev/null
  for s in torch_mxfp4 triton_mxfp4; do
    step "$s cross-check"
    timeout 60 $PY bench/crosscheck_protocol.py submissions/$s.py --harness-json $RUNS/$s.json \
      --out $R/h200_crosscheck_$s.json
    for mode in leaderboard profile; do   # the profile run is a check that the mode works: kept in logs/
      step "$s $mode"
      dest=$RUNS; [ $mode = profile ] && dest=$LOGS
      HARNESS_SECRET_SEED=h200-validation timeout 90 $PY -m harness run submissions/$s.py --task mxfp4_mm \
        --mode $mode --max-repeats 30 --json $dest/$s.$mode.json --quiet | tail -2
    done
  done
fi
# every GPU test no longer fits one call (420 s were not enough at 22516aa): three parts, one call each
gpu_tests() {  # gpu_tests NAME LIMIT_S TEST_PATH...
  local name=$1 limit=$2
  shift 2
  step "GPU tests: $name"
  timeout -k 5 "$limit" $PY -m pytest -q -m gpu -p no:cacheprovider "$@" \
    --junitxml=$R/h200_gpu_tests_$name.xml > $LOGS/gpu_tests_$name.log 2>&1
  $PY bench/relative_paths.py $R/h200_gpu_tests_$name.xml   # pytest names the test files by absolute path
  tail -5 $LOGS/gpu_tests_$name.log
}
if [ "$stage" = checks ]; then   # about 2 minutes at 22516aa
  gpu_tests core 300 tests/adversarial tests/test_call_deadline.py tests/test_pool.py tests/test_persisting_l2.py \
    tests/test_tasks.py tests/test_timing_trust.py
  gpu_tests compile_cache 120 tests/test_compile_cache.py
fi
if [ "$stage" = checks-runs ]; then   # the examples' GPU runs (about a minute at a1faa09)
  gpu_tests runs 300 tests/test_gpu_runs.py
fi
if [ "$stage" = checks-docs ]; then   # the documented commands marked '# needs: gpu'
  gpu_tests docs 540 tests/test_docs.py
fi
if [ "$stage" = ranked ]; then
  shift
  for run in triton_mxfp4:mxfp4_mm:90 triton_nvfp4:nvfp4_gemm:200 torch_nvfp4:nvfp4_gemm:250; do
    IFS=: read -r sub task limit <<< "$run"
    [ $# -gt 0 ] && [[ " $* " != *" $sub "* ]] && continue
    step "$sub ranked run (device clock)"
    timeout -k 5 "$limit" $PY -m harness run submissions/$sub.py --task $task --mode leaderboard \
      --json $RUNS/$sub.leaderboard_clock.json > $LOGS/$sub.leaderboard_clock.log 2>&1
    tail -3 $LOGS/$sub.leaderboard_clock.log
  done
fi
if [ "$stage" = verdicts ]; then   # about 8 minutes
  step "verdict times through a verdict server"
  timeout -k 5 240 $PY bench/verdict_time.py --examples triton_mxfp4,triton_nvfp4 --repeats 2 --copies 0 --server \
    --budget-s 210 --out "$R/$(gpu_slug)_verdicts/verdict_time_server.json" > $LOGS/verdict_time_server.log 2>&1
  tail -4 $LOGS/verdict_time_server.log
  step "verdict times"
  timeout -k 5 330 $PY bench/verdict_time.py --examples triton_mxfp4,triton_nvfp4 --repeats 2 --copies 0 \
    --budget-s 300 --out "$R/$(gpu_slug)_verdicts/verdict_time.json" > $LOGS/verdict_time.log 2>&1
  tail -4 $LOGS/verdict_time.log
  step "check cost"
  timeout -k 5 90 $PY bench/check_cost.py --out $R/h200_check_cost.json > $LOGS/check_cost.log 2>&1
  tail -4 $LOGS/check_cost.log
fi
if [ "$stage" = run-all ]; then   # about 9 minutes (145.4 s a run-all on an H200 at 9715b61), into the GPU's own file
  step "run-alls of 10 new mxfp4 files (up to 4, while 500 s allow)"
  timeout -k 5 540 $PY bench/verdict_time.py --examples triton_mxfp4 --repeats 0 --copies 10 --run-all-rounds 4 --budget-s 500 \
    --out "$R/$(gpu_slug)_verdicts/run_all_mxfp4.json" > $LOGS/run_all_mxfp4.log 2>&1
  tail -4 $LOGS/run_all_mxfp4.log
fi
if [ "$stage" = run-all-ab ]; then   # about 9 minutes: BASE=DIR (a copy of another commit) BASE_COMMIT=SHA
  # (rounds resumed into the GPU's own file: a later call with the same two commits adds to it)
  step "run-all of 10 new mxfp4 files, this tree against $BASE_COMMIT (2 rounds)"
  ab=$R/$(gpu_slug)_verdicts/run_all_ab.json
  timeout -k 5 560 $PY bench/verdict_time.py --examples triton_mxfp4 --repeats 0 --copies 10 --run-all-rounds 2 \
    --baseline-tree "${BASE:?BASE=DIR, a copy of the baseline commit}" --baseline-commit "${BASE_COMMIT:?}" \
    --budget-s 530 --resume --out "$ab" > $LOGS/run_all_ab.log 2>&1
  tail -6 $LOGS/run_all_ab.log
fi
if [ "$stage" = lead-in-mxfp4 ]; then   # about 2 minutes (90 s on an H200 at 9715b61)
  step "lead-in A/B, mxfp4: short (the default) against chunk"
  timeout -k 5 290 $PY bench/lead_in.py --task mxfp4_mm --settings chunk,short --rounds 4 --budget-s 270 \
    --out "$R/$(gpu_slug)_verdicts/lead_in_short_mxfp4.json" > $LOGS/lead_in_short_mxfp4.log 2>&1
  tail -3 $LOGS/lead_in_short_mxfp4.log
fi
if [ "$stage" = lead-in-nvfp4 ]; then   # about 4 minutes (213 s on an H200 at 9715b61)
  step "lead-in A/B, nvfp4: short (the default) against chunk"
  timeout -k 5 330 $PY bench/lead_in.py --task nvfp4_gemm --settings chunk,short --rounds 4 --budget-s 300 \
    --out "$R/$(gpu_slug)_verdicts/lead_in_short_nvfp4.json" > $LOGS/lead_in_short_nvfp4.log 2>&1
  tail -3 $LOGS/lead_in_short_nvfp4.log
fi
if [ "$stage" = boards ] || [ "$stage" = finals ]; then   # the files of the GPU that came
  boards=$R/ranks/ranks-$(gpu_slug)-nvfp4_gemm-boards-short.json
  budget=${BOARDS_BUDGET:-540}
fi
if [ "$stage" = boards ]; then   # one call: about 7 boards (BOARDS_BUDGET=S: S seconds, default 540)
  resume=""; [ -f "$boards" ] && resume=--resume
  step "nvfp4 boards (rule 2, the short lead-in)"
  timeout -k 5 $((budget + 30)) $PY bench/ranks.py --task nvfp4_gemm --boards 10 --finals 0 --budget-s "$budget" \
    $resume --out "$boards" > $LOGS/boards.log 2>&1
  tail -4 $LOGS/boards.log
fi
if [ "$stage" = finals ]; then   # issue 50: nvfp4 final scorings, resumed from the GPU's file (BOARDS_BUDGET too;
  # FINAL_ROUNDS=R: finals of up to R rounds, default 10, in a file of their own when not 10)
  rounds=${FINAL_ROUNDS:-10}
  finals=${boards%-boards-short.json}-finals.json; [ "$rounds" = 10 ] || finals=${finals%.json}-r$rounds.json
  step "nvfp4 finals (a copy, the file and a variant 4% slower; up to $rounds rounds)"
  timeout -k 5 $((budget + 30)) $PY bench/ranks.py --task nvfp4_gemm --boards 0 --finals 10 --slowdown-pairs 3 --budget-s "$budget" \
    --max-rounds "$rounds" --resume --calibrate-from "$boards" --out "$finals" > $LOGS/finals.log 2>&1
  tail -4 $LOGS/finals.log
fi
if [ "$stage" = escape ]; then   # about 3 minutes
  step "wall-gap series (fresh processes)"
  timeout -k 5 300 $PY bench/wall_gap.py --runs 6 --fresh-processes --out $LOGS/wall_gap_probe.jsonl \
    submissions/triton_mxfp4.py --task mxfp4_mm > $LOGS/wall_gap_probe.log 2>&1
  grep -v "^\[harness\]" $LOGS/wall_gap_probe.log | tail -8
fi
if [ "$stage" = b ]; then
  step timing;   timeout 400 $PY bench/validate_timing.py --out $R/h200_timing.json
  step defenses; timeout 150 $PY bench/defense_overhead.py --out $R/h200_defense_overhead.json -n 3 --max-repeats 30
fi
step done   # saves everything
exit 0
