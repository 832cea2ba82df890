#!/usr/bin/env bash
# Set up, check the code (scripts/check.sh: ruff, mypy, import-linter, import cycles, complexity; a
# finding fails before any test runs), then run the test suite (GPU-only tests are skipped without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
bash scripts/check.sh
python -m pytest -q "$@"
