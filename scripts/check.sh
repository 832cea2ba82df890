#!/usr/bin/env bash
# The code checks itself: lint, format, types, layering, import cycles and complexity. Every step runs
# (so one report shows all findings); any finding fails the script. scripts/test.sh and .ci/run call it.
#   ruff check .            lint ([tool.ruff] in pyproject.toml)
#   ruff format --check .   formatting
#   mypy                    types of harness/ (the files and strictness in [tool.mypy])
#   lint-imports            the layering contracts ([tool.importlinter])
#   check_code.py cycles    no import cycle between the modules of harness/
#   check_code.py complexity  no function in harness/ above cyclomatic complexity 15 (radon)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/python ]; then . .venv/bin/activate; fi  # else: the tools of the active environment
failed=()
step() {
  local name=$1
  shift
  echo "== $name" >&2
  if ! "$@"; then failed+=("$name"); fi
}
step "ruff check" ruff check .
step "ruff format" ruff format --check .
step "mypy" mypy
step "import layering" lint-imports --no-logo
step "import cycles" python scripts/check_code.py cycles
step "complexity" python scripts/check_code.py complexity
if [ ${#failed[@]} -gt 0 ]; then
  echo "check.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "check.sh: all checks passed" >&2
