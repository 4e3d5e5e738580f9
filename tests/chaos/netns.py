"""The private network namespace a scenario runs in, and the faults it injects there.

Every scenario runs under `unshare --net --pid --mount --fork --kill-child --mount-proc`:
its only interface is a fresh `lo`, so no packet can leave the machine, and every
iptables rule it adds lives and dies with the namespace. Processes are told apart
by group id (each node and worker runs under its own gid via setpriv), because on
loopback every outgoing connection has source address 127.0.0.1: a mangle rule marks
each packet with its sender, CONNMARK remembers who opened each connection, and the
CHAOS chain drops packets by (sender, receiver) with an optional probability.
"""

from __future__ import annotations

import os
import socket
import subprocess

HOST_NETNS_ENV = "RAFTCRON_CHAOS_HOST_NETNS"
CHAIN = "CHAOS"


class NotPrivate(RuntimeError):
    """Refusing to touch the network: this process is not in a private namespace."""


def netns_inode() -> int:
    return os.stat("/proc/self/ns/net").st_ino


def ensure_private() -> None:
    """Raise unless we run in a network namespace other than the launcher's, with `lo` only."""
    host = os.environ.get(HOST_NETNS_ENV)
    if not host or int(host) == netns_inode():
        raise NotPrivate(
            f"not in a private network namespace (run under unshare --net; {HOST_NETNS_ENV} unset or ours)"
        )
    interfaces = sorted(name for _, name in socket.if_nameindex())
    if interfaces != ["lo"]:
        raise NotPrivate(f"the namespace has interfaces {interfaces}; expected only lo")


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=20)


def loopback_up() -> None:
    ensure_private()
    _run("ip", "link", "set", "lo", "up")


class Firewall:
    """Cut, lossy and one-way links between named processes (nodes and workers).

    `members` maps a name to (gid, address); the address is where it listens, or "" for
    a process that only connects (a worker). Mark 0 (the scenario driver) is never dropped.
    """

    def __init__(self, members: dict[str, tuple[int, str]]) -> None:
        ensure_private()
        self._members: dict[str, tuple[int, str]] = {}
        self._marks: dict[str, int] = {}
        # The opener's mark stays on its connection: replies to it are attributed to it too.
        _run(
            "iptables",
            "-t",
            "mangle",
            "-A",
            "OUTPUT",
            "-m",
            "conntrack",
            "--ctstate",
            "NEW",
            "-j",
            "CONNMARK",
            "--save-mark",
        )
        _run("iptables", "-N", CHAIN)
        _run("iptables", "-A", "INPUT", "-j", CHAIN)
        self.rules: list[str] = []
        for name, (gid, address) in sorted(members.items()):
            self.add(name, gid, address)

    def add(self, name: str, gid: int, address: str) -> None:
        """Mark the packets of processes running with `gid` as `name`'s (before CONNMARK saves it)."""
        if name in self._members:
            return
        self._members[name] = (gid, address)
        self._marks[name] = len(self._marks) + 1
        _run(
            "iptables",
            "-t",
            "mangle",
            "-I",
            "OUTPUT",
            "1",
            "-m",
            "owner",
            "--gid-owner",
            str(gid),
            "-j",
            "MARK",
            "--set-mark",
            str(self._marks[name]),
        )

    def drop(self, sender: str, receiver: str, probability: float = 1.0) -> None:
        """Drop packets `sender` sends to `receiver` (all of them, or at random with `probability`)."""
        ensure_private()
        chance = (
            ["-m", "statistic", "--mode", "random", "--probability", f"{probability:.3f}"] if probability < 1 else []
        )
        mark = ["-m", "mark", "--mark", str(self._marks[sender])]
        address = self._members[receiver][1]
        if address:  # connections the sender opened to the receiver
            _run("iptables", "-A", CHAIN, *mark, "-d", address, *chance, "-j", "DROP")
        # connections the receiver opened to the sender: the sender's replies
        _run(
            "iptables",
            "-A",
            CHAIN,
            *mark,
            "-m",
            "connmark",
            "--mark",
            str(self._marks[receiver]),
            *chance,
            "-j",
            "DROP",
        )
        self.rules.append(f"{sender}->{receiver}" + (f" p={probability:.2f}" if chance else ""))

    def cut(self, a: str, b: str, probability: float = 1.0) -> None:
        self.drop(a, b, probability)
        self.drop(b, a, probability)

    def isolate(self, name: str, others: list[str]) -> None:
        for other in others:
            if other != name:
                self.cut(name, other)

    def heal(self) -> None:
        _run("iptables", "-F", CHAIN)
        self.rules = []
