#!/usr/bin/env bash
# Run the whole test suite: the formatter, linter and type checker, then unit, simulation,
# integration (real processes on loopback), security, chaos and e2e tests. Installs what it
# needs into .venv first. Extra arguments go to pytest (e.g. -k failover, tests/unit).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
bootstrap_venv "server,test"
# Seconds, and they fail before any cluster starts: formatting, lint, and the types of the code
# whose mistakes cost most (the replicated core, the planning every node shares, the worker SDK).
.venv/bin/python -m ruff format --check scheduler tests worker bench
.venv/bin/python -m ruff check scheduler tests worker bench
.venv/bin/python -m mypy scheduler/core scheduler/planning worker
# System packages for the chaos tests (network namespaces, iptables); with CI=true a missing
# prerequisite fails the run instead of skipping those tests.
bash scripts/chaos-prereqs.sh
bash scripts/e2e-prereqs.sh  # Chromium for the dashboard's browser tests, same rules
bash scripts/promtool-prereqs.sh  # promtool, to check a node's /metrics exposition, same rules
if [ "$#" -gt 0 ]; then
    exec .venv/bin/python -m pytest -q -ra "$@"
fi
# The pure tests (unit, simulation) are CPU-bound: they run on every core.
.venv/bin/python -m pytest -q -ra -n auto tests/unit tests/sim
# The tests that start real processes follow in two lanes side by side, each one test at a time:
# the chaos scenarios, each in its own network namespace (so no port of theirs meets the
# loopback tests'), and the loopback tests. The chaos lane's report is printed after.
chaos_log="$(mktemp)"
.venv/bin/python -m pytest -q -ra -p no:cacheprovider tests/chaos >"$chaos_log" 2>&1 &
chaos_pid=$!
trap 'kill "$chaos_pid" 2>/dev/null || true; rm -f "$chaos_log"' EXIT
loopback_status=0
.venv/bin/python -m pytest -q -ra tests/e2e tests/integration tests/security || loopback_status=$?
chaos_status=0
wait "$chaos_pid" || chaos_status=$?
echo "---- tests/chaos (ran beside the tests above) ----"
cat "$chaos_log"
if [ "$loopback_status" -ne 0 ]; then exit "$loopback_status"; fi
exit "$chaos_status"
