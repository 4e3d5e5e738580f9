#!/usr/bin/env bash
# Put Prometheus's promtool at .venv/bin/promtool, for the test that runs `promtool check metrics`
# on a node's /metrics (tests/integration/test_ecosystem.py). It comes from Debian's `prometheus`
# package, downloaded and unpacked rather than installed: installing would also set up and start
# a Prometheus server, which the tests do not want. Idempotent and quiet (about 20 MB, once);
# without apt-get it warns and exits 0, so the check falls back to prometheus_client's parser;
# with CI=true it exits 1 instead, because CI must run it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=.venv/bin/promtool
[ -x "$target" ] && exit 0
give_up() {
    echo "promtool-prereqs (promtool check metrics): $1; the test falls back to prometheus_client's parser" >&2
    if [ "${CI:-}" = "true" ]; then
        exit 1
    fi
    exit 0
}
command -v apt-get >/dev/null 2>&1 || give_up "no apt-get here"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1) ||
    { apt-get update -qq >/dev/null 2>&1 && (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1); } ||
    give_up "apt-get download prometheus failed"
dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -xO ./usr/bin/promtool >"$work/promtool" ||
    give_up "no promtool in the prometheus package"
chmod 0755 "$work/promtool"
mv "$work/promtool" "$target"
