"""Chaos tests need root, unshare and iptables working inside a private network namespace.

Missing prerequisites skip the chaos scenarios locally and fail them when CI=true
(scripts/chaos-prereqs.sh installs them). The checker's own tests need nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.chaos.launch import UNSHARE

# The same rule shapes the firewall uses (netns.py), tried in a throwaway namespace.
_PROBE = (
    "ip link set lo up"
    " && iptables -t mangle -A OUTPUT -m owner --gid-owner 2001 -j MARK --set-mark 1"
    " && iptables -t mangle -A OUTPUT -m conntrack --ctstate NEW -j CONNMARK --save-mark"
    " && iptables -A INPUT -m mark --mark 1 -m connmark --mark 2 -m statistic --mode random --probability 0.5 -j DROP"
    " && setpriv --regid=2001 --clear-groups -- true"
)


def chaos_problem() -> str | None:
    """Why chaos scenarios cannot run here, or None."""
    if os.geteuid() != 0:
        return "chaos scenarios need root (unshare --net, iptables inside the namespace)"
    for tool in ("unshare", "setpriv", "ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} not found (scripts/chaos-prereqs.sh installs it)"
    try:
        probe = subprocess.run([*UNSHARE, "sh", "-c", _PROBE], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "the namespace probe timed out"
    if probe.returncode != 0:
        return f"cannot set up a private namespace with iptables: {probe.stderr.strip()[-500:]}"
    return None


@pytest.fixture(scope="session")
def chaos_ready() -> None:
    problem = chaos_problem()
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"chaos prerequisites missing in CI: {problem}")
    pytest.skip(problem)
