#!/usr/bin/env bash
# Start the real thing: a local 3-node raftcron cluster on loopback, with the sample jobs applied.
# Extra arguments go to `raftcron dev` (e.g. --nodes 5, --fresh, --port-base 9100). Ctrl-C stops it all.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
bootstrap_venv "server"
exec .venv/bin/raftcron dev "$@"
