"""Processes of one chaos scenario: nodes (a LocalCluster, one gid per node), SDK workers,
and a Recorder for what clients saw. Everything started here is killed by `close()`.

Runs inside the private namespace only (see netns.py): nodes listen on 127.0.0.2...
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.local import LocalCluster, wait_until
from tests.chaos import powercut
from tests.chaos.checker import AckedWrite, Answer, Grant, RunObs, SinkWrite
from tests.chaos.netns import Firewall
from tests.chaos.resources import ResourceSampler

NODE_GID_BASE = 2000
WORKER_GID_BASE = 3000
PORT_BASE = 7100  # the namespace is private: every port is free
# Fast failover; epochs keep it safe. The 2 s lease makes worker faults quick to observe.
CHAOS_SETTINGS = {
    "raft": {
        "election_timeout_min_s": 0.4,
        "election_timeout_max_s": 1.2,
        "leader_fallback_timeout_s": 1.2,
        "connection_retry_s": 0.5,
    },
    "lease_ttl_s": 2.0,
    "propose_timeout_s": 3.0,
    "max_lease_wait_s": 2.0,
}
T_START = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - T_START:7.2f}s] {message}", flush=True)


def now_us() -> int:
    return time.time_ns() // 1000


def setpriv(gid: int) -> list[str]:
    """Run as root with group `gid`: the firewall tells processes apart by it."""
    return ["setpriv", f"--regid={gid}", "--clear-groups", "--"]


class ChaosCluster:
    def __init__(self, workdir: Path, nodes: int = 3, **overrides) -> None:
        self.hosts = [f"127.0.0.{i + 2}" for i in range(nodes)]
        settings = {**CHAOS_SETTINGS, **overrides}
        self.lc = LocalCluster(
            workdir / "cluster", nodes=nodes, port_base=PORT_BASE, hosts=self.hosts, overrides=settings
        )
        self.ids = [m.node_id for m in self.lc.members]
        self.paused: set[str] = set()
        self.synced = settings["raft"].get("sync", True)

    def gid(self, node_id: str) -> int:
        return NODE_GID_BASE + self.ids.index(node_id) + 1

    def host(self, node_id: str) -> str:
        return self.hosts[self.ids.index(node_id)]

    def start(self, node_id: str | None = None) -> None:
        for nid in [node_id] if node_id else self.ids:
            # The trace lives beside the node's data directory: a power cut must not touch it.
            trace = f"{powercut.TRACE_ENV}={self.trace_path(nid)}"
            self.lc.command_prefix = ["env", trace, *setpriv(self.gid(nid))]
            self.lc.start(nid)

    def raft_dir(self, node_id: str) -> Path:
        return self.lc.member(node_id).config_path.parent / "raft"

    def trace_path(self, node_id: str) -> Path:
        return self.lc.data_dir / f"{node_id}.synctrace"

    def _disk_copy(self, node_id: str) -> Path:
        return self.lc.data_dir / f"{node_id}.disk"

    def record_disks(self) -> None:
        """What every node's disk holds now (before the nodes first start): a power cut restores
        it for whatever a node never synced."""
        for node_id in self.ids:
            powercut.record(self.raft_dir(node_id), self._disk_copy(node_id))

    def power_cut(self, node_ids, tears: dict[str, powercut.Tear] | None = None) -> dict[str, dict]:
        """SIGKILL every process of `node_ids` at once (compaction children too), then throw away
        what each had not synced (`tears`: what of the write in flight lands). The nodes stay
        down; each one's file fates."""
        members = [self.lc.member(n) for n in node_ids if self.alive(n)]
        for member in members:
            _signal_group(member.process, signal.SIGKILL)
        for member in members:
            member.process.wait(timeout=15)
            _wait_group_gone(member.process.pid, timeout_s=15)
            self.paused.discard(member.node_id)
        tears = tears or {}
        return {
            n: powercut.cut(
                self.raft_dir(n), self._disk_copy(n), self.trace_path(n), self.synced, tears.get(n, powercut.NO_TEAR)
            )
            for n in node_ids
        }

    def kill(self, node_id: str, signum: int = signal.SIGKILL) -> None:
        if node_id in self.paused and signum == signal.SIGTERM:
            self.resume(node_id)
        self.lc.kill(node_id, signum)
        self.paused.discard(node_id)

    def pause(self, node_id: str) -> None:
        self.lc.kill(node_id, signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: str) -> None:
        self.lc.kill(node_id, signal.SIGCONT)
        self.paused.discard(node_id)

    def alive(self, node_id: str) -> bool:
        return self.lc.member(node_id).alive()

    def leader(self, exclude: tuple[str, ...] = ()) -> str | None:
        return self.lc.leader(exclude=tuple(exclude) + tuple(self.paused))

    def wait_for_leader(self, timeout_s: float = 20.0, exclude: tuple[str, ...] = ()) -> str:
        return self.lc.wait_for_leader(timeout_s, exclude=tuple(exclude) + tuple(self.paused))

    def status(self, node_id: str):
        return None if node_id in self.paused else self.lc.status(node_id)

    def client(self, node_id: str | None = None, timeout_s: float = 5.0):
        return self.lc.client(node_id, timeout_s)

    @property
    def addresses(self) -> list[str]:
        return self.lc.addresses

    def address(self, node_id: str) -> str:
        return self.lc.member(node_id).grpc_address

    def wait_caught_up(self, node_id: str, timeout_s: float = 20.0) -> None:
        """Until `node_id` has applied what the leader had applied when we started waiting."""
        leader = self.wait_for_leader(timeout_s)
        target = self.status(leader).applied_index

        def caught_up():
            status = self.status(node_id)
            return status is not None and status.applied_index >= target

        wait_until(caught_up, timeout_s, f"{node_id} to catch up to index {target}", interval_s=0.1)

    def log_alerts(self) -> list[str]:
        alerts = []
        for member in self.lc.members:
            text = member.log_path.read_text(errors="replace") if member.log_path.exists() else ""
            for line in text.splitlines():
                if "CRITICAL" in line or "truncating already-applied" in line:
                    alerts.append(f"{member.node_id}: {line.strip()[:300]}")
        return alerts[:20]

    def close(self) -> None:
        for node_id in list(self.paused):
            self.resume(node_id)
        try:
            self.lc.stop()
        finally:
            for member in self.lc.members:
                _kill_group(member.process)

    def firewall_members(self) -> dict[str, tuple[int, str]]:
        return {nid: (self.gid(nid), self.host(nid)) for nid in self.ids}


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)  # its session: the process and any children
    except (ProcessLookupError, PermissionError):
        pass


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    """Until no live process of group `pgid` is left: a killed compaction child may still be
    in a write, and must not rename a dump in after the cut. Zombies are finished."""

    def gone():
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                return False
        return True

    wait_until(gone, timeout_s, f"every process of group {pgid} to die", interval_s=0.02)


def _kill_group(process: subprocess.Popen | None) -> None:
    if process is None:
        return
    _signal_group(process, signal.SIGKILL)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


@dataclass
class WorkerProc:
    worker_id: str
    gid: int
    process: subprocess.Popen
    log_path: Path


class Workers:
    """SDK worker processes (tests/chaos/workerproc.py), each under its own gid."""

    def __init__(self, workdir: Path, cluster_arg: str, sink_url: str) -> None:
        self._workdir = workdir
        self._cluster_arg = cluster_arg
        self._sink_url = sink_url
        self.procs: dict[str, WorkerProc] = {}
        self._concurrency: dict[str, int] = {}
        self.on_start = None  # called with (worker_id, gid): the firewall learns the new process

    def restart(self, worker_id: str) -> WorkerProc:
        """Start a worker again under its old id and gid (after it was killed)."""
        old = self.procs.pop(worker_id)
        return self.start(worker_id, self._concurrency.get(worker_id, 4), gid=old.gid)

    def start(self, worker_id: str, concurrency: int = 4, gid: int | None = None) -> WorkerProc:
        gid = gid or WORKER_GID_BASE + len(self.procs) + 1
        self._concurrency[worker_id] = concurrency
        log_path = self._workdir / f"{worker_id}.log"
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(
                [
                    *setpriv(gid),
                    sys.executable,
                    "-m",
                    "tests.chaos.workerproc",
                    "--cluster",
                    self._cluster_arg,
                    "--sink",
                    self._sink_url,
                    "--worker-id",
                    worker_id,
                    "--concurrency",
                    str(concurrency),
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[worker_id] = WorkerProc(worker_id, gid, process, log_path)
        if self.on_start is not None:
            self.on_start(worker_id, gid)
        return self.procs[worker_id]

    def signal(self, worker_id: str, signum: int) -> None:
        proc = self.procs[worker_id].process
        if proc.poll() is None:
            proc.send_signal(signum)

    def stop(self, worker_id: str, timeout_s: float = 15.0) -> None:
        """SIGCONT then SIGTERM (a graceful drain); SIGKILL after `timeout_s`."""
        proc = self.procs[worker_id].process
        self.signal(worker_id, signal.SIGCONT)
        self.signal(worker_id, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)

    def stop_all(self) -> None:
        for worker_id in self.procs:
            self.signal(worker_id, signal.SIGCONT)
            self.signal(worker_id, signal.SIGTERM)
        for worker_id in self.procs:
            self.stop(worker_id)

    def close(self) -> None:
        for proc in self.procs.values():
            _kill_group(proc.process)

    def firewall_members(self) -> dict[str, tuple[int, str]]:
        return {w.worker_id: (w.gid, "") for w in self.procs.values()}


@dataclass
class Recorder:
    """What clients and workers observed; thread-safe appends."""

    grants: list[Grant] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    acked: list[AckedWrite] = field(default_factory=list)
    interim: dict[str, list[RunObs]] = field(default_factory=dict)
    sink: list[SinkWrite] = field(default_factory=list)
    expectations: list[tuple[str, bool, str]] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, attribute: str, item) -> None:
        with self.lock:
            getattr(self, attribute).append(item)

    def expect(self, name: str, held: bool, detail: str = "") -> None:
        say(f"expect {name}: {'ok' if held else 'FAILED'} {detail}")
        self.add("expectations", (name, bool(held), detail))

    def count(self, name: str, amount: float = 1) -> None:
        with self.lock:
            self.stats[name] = self.stats.get(name, 0) + amount


class Scene:
    """Everything one scenario owns; `close()` stops it all, whatever state it is in."""

    def __init__(self, workdir: Path, rng, nodes: int = 3, **overrides) -> None:
        self.workdir = workdir
        self.rng = rng
        self.cluster = ChaosCluster(workdir, nodes, **overrides)
        self.resources = ResourceSampler(self.cluster.lc).start()
        self.recorder = Recorder()
        self.workers: Workers | None = None
        self.sink = None
        self.threads: list = []  # client threads with a stop() method
        self._firewall: Firewall | None = None

    @property
    def firewall(self) -> Firewall:
        if self._firewall is None:
            members = self.cluster.firewall_members()
            if self.workers is not None:
                members.update(self.workers.firewall_members())
                self.workers.on_start = lambda worker_id, gid: self._firewall.add(worker_id, gid, "")
            self._firewall = Firewall(members)
        return self._firewall

    def with_workers(self) -> Workers:
        from tests.chaos.sink import FencedSink

        self.sink = FencedSink(self.recorder)
        self.workers = Workers(self.workdir, self.cluster.lc.cluster_arg, self.sink.url)
        return self.workers

    def stop_clients(self) -> None:
        for thread in self.threads:
            thread.stop()
        for thread in self.threads:
            thread.join(timeout=15)
        self.threads = []

    def close(self) -> None:
        self.resources.stop()
        try:
            self.stop_clients()
        finally:
            if self.workers is not None:
                self.workers.close()
            self.cluster.close()
            if self.sink is not None:
                self.sink.close()
