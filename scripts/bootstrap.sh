#!/usr/bin/env bash
# Create or reuse .venv and install raftcron into it (editable), with the given extras.
# Sourced by scripts/dev.sh and scripts/test.sh; re-installs only when pyproject.toml changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

find_python() {
    for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [[ -n "$candidate" ]] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "raftcron needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
    return 1
}

bootstrap_venv() {
    local extras="$1"
    if [[ ! -x .venv/bin/python ]]; then
        echo "creating .venv" >&2
        "$(find_python)" -m venv .venv
    fi
    local stamp=".venv/.raftcron-installed-${extras:-base}"
    local want
    want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
    if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
        echo "installing raftcron${extras:+[$extras]} into .venv" >&2
        .venv/bin/python -m pip install --quiet --upgrade pip
        .venv/bin/python -m pip install --quiet -e ".${extras:+[$extras]}"
        echo "$want" >"$stamp"
    fi
}
