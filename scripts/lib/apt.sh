# Sourced by the *-prereqs.sh scripts: install Debian packages that are missing, quietly.
# Without root (and without passwordless sudo) or apt-get it warns and returns, so the tests
# that need them skip; with CI=true it exits 1 instead, because CI must run them.

# apt_install_missing WHAT PACKAGE...: WHAT names the tests that need the packages.
apt_install_missing() {
    local what=$1
    shift
    [ $# -eq 0 ] && return 0
    local as_root=()
    if ! command -v apt-get >/dev/null 2>&1; then
        _apt_give_up "$what" "no apt-get here" "$@"
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            as_root=(sudo -n)
        else
            _apt_give_up "$what" "not root and no passwordless sudo" "$@"
            return 0
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${as_root[@]}" apt-get update -qq >/dev/null
    "${as_root[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null ||
        _apt_give_up "$what" "apt-get install failed" "$@"
}

_apt_give_up() {
    local what=$1 why=$2
    shift 2
    echo "$what: $why; they need: $*" >&2
    if [ "${CI:-}" = "true" ]; then
        exit 1
    fi
}
