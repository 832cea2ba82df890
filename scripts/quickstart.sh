#!/usr/bin/env bash
# The main job on a fresh machine: set up, then run one example submission of each task through
# test and benchmark mode and print the tables (on the GPU when there is one, else on the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
status=0
python -m harness run submissions/torch_mxfp4.py --task mxfp4_mm || status=$?
python -m harness run submissions/torch_nvfp4.py --task nvfp4_gemm || status=$?
exit $status
