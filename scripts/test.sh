#!/usr/bin/env bash
# Run the whole test suite: unit, simulation, integration (real processes on loopback) and,
# where prerequisites exist, chaos tests. Installs what it needs into .venv first.
# Extra arguments go to pytest (e.g. -k failover, tests/unit).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
bootstrap_venv "test"
exec .venv/bin/python -m pytest -q -ra "$@"
