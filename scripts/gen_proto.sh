#!/usr/bin/env bash
# Regenerate the committed gRPC code (worker/api/v1/*_pb2.py, *_pb2.pyi, *_pb2_grpc.py) from
# proto/worker/api/v1/*.proto with the pinned grpcio-tools (see scripts/gen_proto.py).
#
# Usage: scripts/gen_proto.sh [--out DIR]
# Uses $PYTHON if set, else the repository's .venv (created if missing). Installs the pinned
# grpcio-tools into that environment if another version (or none) is installed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ -z "${PYTHON:-}" ]]; then
    PYTHON=.venv/bin/python
    if [[ ! -x "$PYTHON" ]]; then
        python3 -m venv .venv
    fi
fi

pin="$("$PYTHON" scripts/gen_proto.py --print-pin)"
installed="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("grpcio-tools"))' 2>/dev/null || true)"
if [[ "$installed" != "$pin" ]]; then
    echo "installing grpcio-tools==$pin (found: ${installed:-none})" >&2
    "$PYTHON" -m pip install --quiet "grpcio-tools==$pin"
fi

exec "$PYTHON" scripts/gen_proto.py "$@"
