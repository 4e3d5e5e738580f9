#!/usr/bin/env bash
# Install what the chaos tests need: ip (iproute2), iptables, unshare and setpriv (util-linux),
# faketime. Idempotent and quiet: installs only what is missing, prints nothing when all is there.
# Without root (and without passwordless sudo) it warns and exits 0, so the chaos tests skip;
# with CI=true it exits 1 instead, because CI must run them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
{ command -v unshare && command -v setpriv; } >/dev/null 2>&1 || missing+=(util-linux)
command -v faketime >/dev/null 2>&1 || missing+=(faketime)
apt_install_missing "chaos-prereqs (the chaos tests)" "${missing[@]}"
