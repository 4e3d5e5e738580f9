#!/usr/bin/env bash
# Install what the dashboard's browser tests (tests/e2e) need: Debian's Chromium, driven by the
# playwright package of the `test` extra (never `playwright install`: it downloads browsers), and
# a font to render pages with. Idempotent and quiet: installs only what is missing, prints nothing
# when all is there. Without root (and without passwordless sudo) it warns and exits 0, so the
# e2e tests skip; with CI=true it exits 1 instead, because CI must run them.
set -euo pipefail

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -d /usr/share/fonts/truetype/dejavu ] || missing+=(fonts-dejavu-core)
[ ${#missing[@]} -eq 0 ] && exit 0

give_up() {
    echo "e2e-prereqs: $1; the dashboard's browser tests need: ${missing[*]}" >&2
    [ "${CI:-}" = "true" ] && exit 1
    exit 0
}

command -v apt-get >/dev/null 2>&1 || give_up "no apt-get here"
if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    give_up "not root and no passwordless sudo"
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq >/dev/null
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    give_up "apt-get install failed"
