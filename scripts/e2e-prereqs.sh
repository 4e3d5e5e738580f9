#!/usr/bin/env bash
# Install what the dashboard's browser tests (tests/e2e) need: Debian's Chromium, driven by the
# playwright package of the `test` extra (never `playwright install`: it downloads browsers), and
# a font to render pages with. Idempotent and quiet: installs only what is missing, prints nothing
# when all is there. Without root (and without passwordless sudo) it warns and exits 0, so the
# e2e tests skip; with CI=true it exits 1 instead, because CI must run them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -d /usr/share/fonts/truetype/dejavu ] || missing+=(fonts-dejavu-core)
apt_install_missing "e2e-prereqs (the dashboard's browser tests)" "${missing[@]}"
