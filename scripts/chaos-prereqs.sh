#!/usr/bin/env bash
# Install what the chaos tests need: ip (iproute2), iptables, unshare and setpriv (util-linux),
# faketime. Idempotent and quiet: installs only what is missing, prints nothing when all is there.
# Without root (and without passwordless sudo) it warns and exits 0, so the chaos tests skip;
# with CI=true it exits 1 instead, because CI must run them.
set -euo pipefail

missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
{ command -v unshare && command -v setpriv; } >/dev/null 2>&1 || missing+=(util-linux)
command -v faketime >/dev/null 2>&1 || missing+=(faketime)
[ ${#missing[@]} -eq 0 ] && exit 0

give_up() {
    echo "chaos-prereqs: $1; chaos tests need: ${missing[*]}" >&2
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
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
