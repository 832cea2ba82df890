#!/usr/bin/env bash
# Creates .venv and installs the harness with what it needs on this machine:
# - a GPU machine whose python3 already has a CUDA/ROCm torch: reuse it (system site packages);
# - otherwise the CPU build of torch, and Triton >= 3.8 so Triton submissions run under its interpreter;
# - the test extra, which the README's two commands need: the site, scan, postgres and cluster extras
#   (Plotly and Jinja2, kernelguard, psycopg 3, Ray), pytest, and the checks of scripts/check.sh (ruff,
#   mypy and type stubs, import-linter, radon). A lean install of the harness alone: pip install -e .
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    "$PY" -m venv --system-site-packages .venv
  else
    "$PY" -m venv .venv
  fi
fi
. .venv/bin/activate
# pip and the build backends print banners and notices of their own: each install keeps them in a log,
# shown only when the install fails
LOG=.venv/setup.log
: >"$LOG"
pip_install() {
  echo "installing: $*" >&2
  python -m pip install -q "$@" >>"$LOG" 2>&1 || { echo "pip install $* failed:" >&2; tail -40 "$LOG" >&2; return 1; }
}
python -m pip install -q --upgrade pip >>"$LOG" 2>&1 || true
if ! python -c 'import torch' 2>/dev/null; then
  pip_install "torch==2.13.0" || pip_install --index-url https://download.pytorch.org/whl/cpu "torch>=2.8,<3"
fi
if ! python -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  python -c 'import triton, sys; v = tuple(int(x) for x in triton.__version__.split(".")[:2]); sys.exit(0 if v >= (3, 8) else 1)' 2>/dev/null \
    || pip_install "triton>=3.8"
fi
pip_install -e ".[test]"
bash scripts/install_actionlint.sh   # the workflow lint test (tests/test_ci_workflow.py)
echo "setup done: $(python -c 'import torch; print("torch", torch.__version__, "cuda" if torch.cuda.is_available() else "cpu")')" >&2
