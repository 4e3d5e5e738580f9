"""A bare pysyncobj cluster, configured exactly like a node's Raft log: the baseline of the benchmarks.

Each member is its own process (three SyncObjs in one process would share one GIL and
understate what the cluster can do). The settings come from `RaftSettings` defaults through
`RaftSettings.to_conf`, with a password as in a real cluster. The replicated state is one
method taking bytes that counts entries and chains a SHA-256 over them, so the replicas can be
compared at the end. The parent drives the leader over a pipe:

- `burst(payloads)`: one entry per payload, all in flight at once, each with a callback;
  returns the time from the first call to the last completion.
- `sequential(payloads)`: one call at a time; returns each call's commit latency.

The payloads are built by the caller (the claims benchmark sends real encoded `ClaimRuns`
commands, so pysyncobj compresses and encrypts the same bytes a node would).

Every child exits by itself when its pipe closes or after `max_life_s`.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import secrets
import signal
import threading
import time
from collections import Counter
from pathlib import Path

from bench._harness.common import ports_free, scan_logs

RAW_LOG = "raw.log"


def raw_ports(base: int, nodes: int = 3) -> list[int]:
    return [base + i for i in range(1, nodes + 1)]


# -- the child process --------------------------------------------------------------------------
def _member_main(index: int, addresses: list[str], password: str, data_dir: str, conn, max_life_s: float) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    from pysyncobj import FAIL_REASON, SyncObj, SyncObjConsumer, replicated

    from scheduler.replication import RaftSettings

    logging.basicConfig(
        filename=str(Path(data_dir) / RAW_LOG),
        level=logging.INFO,
        format=f"%(asctime)s r{index} %(levelname)s %(name)s: %(message)s",
    )

    class Sink(SyncObjConsumer):
        def __init__(self) -> None:
            super().__init__()
            self.entries = 0
            self.size = 0
            self.chain = b""

        @replicated
        def put(self, data: bytes) -> int:
            self.entries += 1
            self.size += len(data)
            chained = hashlib.sha256(self.chain)
            chained.update(data)
            self.chain = chained.digest()
            return len(data)

    settings = RaftSettings(
        self_address=addresses[index],
        partner_addresses=tuple(a for i, a in enumerate(addresses) if i != index),
        data_dir=Path(data_dir),
        password=password,
    )
    sink = Sink()
    conf = settings.to_conf(lambda old, new: None)
    syncobj = SyncObj(settings.self_address, list(settings.partner_addresses), conf, consumers=[sink])

    def burst(payloads: list[bytes], timeout_s: float) -> dict:
        count = len(payloads)
        lock = threading.Lock()
        done = threading.Event()
        state = {"left": count, "end": 0.0}
        failures: Counter = Counter()

        def on_done(result, error) -> None:
            with lock:
                if error != FAIL_REASON.SUCCESS:
                    failures[int(error)] += 1
                state["left"] -= 1
                if state["left"] == 0:
                    state["end"] = time.perf_counter()
                    done.set()

        start = time.perf_counter()
        for payload in payloads:
            sink.put(payload, callback=on_done)
        done.wait(timeout_s)
        with lock:
            return {
                "count": count,
                "completed": count - state["left"],
                "failures": dict(failures),
                "elapsed_s": (state["end"] or time.perf_counter()) - start,
            }

    def sequential(payloads: list[bytes], timeout_s: float) -> dict:
        latencies, failures = [], Counter()
        deadline = time.monotonic() + timeout_s
        for payload in payloads:
            if time.monotonic() > deadline:
                failures["deadline"] += 1
                break
            done = threading.Event()
            outcome = {}

            def on_done(result, error, outcome=outcome, done=done) -> None:
                outcome["t"], outcome["error"] = time.perf_counter(), error
                done.set()

            start = time.perf_counter()
            sink.put(payload, callback=on_done)
            if not done.wait(5.0):
                failures["timeout"] += 1
            elif outcome["error"] != FAIL_REASON.SUCCESS:
                failures[int(outcome["error"])] += 1
            else:
                latencies.append(outcome["t"] - start)
        return {"count": len(payloads), "latencies_s": latencies, "failures": dict(failures)}

    def status() -> dict:
        leader = syncobj._getLeader()
        return {
            "leader": syncobj._isLeader(),
            "leader_address": leader.address if leader is not None else "",
            "quorum": syncobj.hasQuorum,
            "commit": syncobj.raftCommitIndex,
            "applied": syncobj.raftLastApplied,
            "entries": sink.entries,
            "bytes": sink.size,
            "chain": sink.chain.hex(),
        }

    handlers = {"burst": burst, "sequential": sequential, "status": status}
    deadline = time.monotonic() + max_life_s
    try:
        while time.monotonic() < deadline:
            if not conn.poll(0.5):
                continue
            try:
                op, args = conn.recv()
            except (EOFError, OSError):
                break
            if op == "stop":
                break
            try:
                conn.send(("ok", handlers[op](*args)))
            except Exception as exc:  # report to the parent instead of dying silently
                conn.send(("error", repr(exc)))
    finally:
        syncobj.destroy()
        conn.close()


# -- the parent ---------------------------------------------------------------------------------
def stop_processes(processes, conns, timeout_s: float) -> None:
    """Ask each child to stop over its pipe, wait for them together, kill what is left, close the pipes."""
    for conn in conns:
        try:
            conn.send(("stop", ()))
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + timeout_s
    for process in processes:
        process.join(max(0.1, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join(5)
    for conn in conns:
        conn.close()


class RawCluster:
    """Three bare pysyncobj members on loopback. Use as a context manager: stop() always runs."""

    def __init__(self, data_dir: Path, port_base: int, nodes: int = 3, max_life_s: float = 1800.0) -> None:
        self.data_dir = Path(data_dir)
        self.addresses = [f"127.0.0.1:{port}" for port in raw_ports(port_base, nodes)]
        self.max_life_s = max_life_s
        self.password = secrets.token_hex(24)
        self._processes: list[multiprocessing.Process] = []
        self._conns: list = []
        if not ports_free(raw_ports(port_base, nodes)):
            raise RuntimeError(f"ports {raw_ports(port_base, nodes)} are in use")

    def member_dir(self, index: int) -> Path:
        return self.data_dir / f"r{index + 1}"

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        for index in range(len(self.addresses)):
            member_dir = self.member_dir(index)
            member_dir.mkdir(parents=True, exist_ok=True)
            parent_end, child_end = ctx.Pipe()
            process = ctx.Process(
                target=_member_main,
                args=(index, self.addresses, self.password, str(member_dir), child_end, self.max_life_s),
                name=f"raw-r{index + 1}",
                daemon=True,
            )
            process.start()
            child_end.close()
            self._processes.append(process)
            self._conns.append(parent_end)

    def call(self, index: int, op: str, *args, timeout_s: float = 60.0):
        conn = self._conns[index]
        try:
            conn.send((op, args))
            if not conn.poll(timeout_s):
                raise TimeoutError(f"raw member r{index + 1} did not answer {op} within {timeout_s}s")
            kind, value = conn.recv()
        except (EOFError, OSError) as exc:
            log_path = self.member_dir(index) / RAW_LOG
            raise RuntimeError(f"raw member r{index + 1} is gone ({exc!r}); see {log_path}") from None
        if kind != "ok":
            raise RuntimeError(f"raw member r{index + 1} failed {op}: {value}")
        return value

    def statuses(self) -> list[dict]:
        return [self.call(i, "status", timeout_s=10.0) for i in range(len(self._processes))]

    def wait_for_leader(self, timeout_s: float = 30.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for index, process in enumerate(self._processes):
                if not process.is_alive():
                    raise RuntimeError(f"raw member r{index + 1} exited; see {self.member_dir(index) / RAW_LOG}")
            seen = self.statuses()
            leaders = [i for i, s in enumerate(seen) if s["leader"]]
            if len(leaders) == 1 and all(s["leader_address"] == self.addresses[leaders[0]] for s in seen):
                if seen[leaders[0]]["quorum"]:
                    return leaders[0]
            time.sleep(0.1)
        raise TimeoutError(f"no raw leader within {timeout_s}s")

    def wait_converged(self, timeout_s: float = 30.0) -> dict:
        """Wait until every member applied the same entries with the same chain; return that status."""
        deadline = time.monotonic() + timeout_s
        while True:
            seen = self.statuses()
            keys = {(s["applied"], s["entries"], s["chain"]) for s in seen}
            if len(keys) == 1:
                return seen[0]
            if time.monotonic() > deadline:
                raise RuntimeError(f"raw replicas disagree after {timeout_s}s: {sorted(keys)}")
            time.sleep(0.2)

    def log_problems(self) -> list[str]:
        return scan_logs(self.member_dir(i) / RAW_LOG for i in range(len(self.addresses)))

    def stop(self) -> None:
        stop_processes(self._processes, self._conns, timeout_s=10)
        self._processes, self._conns = [], []

    def __enter__(self) -> RawCluster:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
