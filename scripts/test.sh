#!/usr/bin/env bash
# Run the whole test suite: unit, simulation, integration (real processes on loopback) and,
# where prerequisites exist, chaos tests. Installs what it needs into .venv first.
# Extra arguments go to pytest (e.g. -k failover, tests/unit).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
bootstrap_venv "server,test"
# System packages for the chaos tests (network namespaces, iptables); with CI=true a missing
# prerequisite fails the run instead of skipping those tests.
bash scripts/chaos-prereqs.sh
bash scripts/e2e-prereqs.sh  # Chromium for the dashboard's browser tests, same rules
exec .venv/bin/python -m pytest -q -ra "$@"
