"""Per-group ceilings of several Raft groups on the same three nodes, next to one group, in one run.

    python -m bench groups            # 1, 2 and 3 groups, both layouts (about 3.5 minutes)
    python -m bench groups --quick    # 1 and 3 groups, shorter phases (under a minute)

Each group is three replicas of raftcron's own replicated log (`RaftLog` with `RaftSettings`
defaults and a password of its own: the durable journal, synced unless
RAFTCRON_BENCH_RAFT_SYNC=off, pysyncobj's compaction, the real core applying every entry) on
its own loopback ports. Two layouts of G groups on three nodes:

- shared: three processes, one per node, each holding one replica of every group (G SyncObjs,
  G tick threads, one GIL);
- split: one process per replica, 3 x G processes.

One group is the same in both layouts: it is the baseline, measured first and (in a full run)
again last, since other work on the machine may change in between; ratios are to the median of
the two. The leaders are spread first (group
g is led from node g mod 3, moved there with pysyncobj's leadership transfer), as a deployment
of several groups would place them. Then the leader of each group opens an epoch, applies 1,000
jobs, and proposes real `ClaimRuns` commands for them from inside its process (what the
trigger loop does after planning; planning is not measured), every group at once:

- paced: one claim per entry, one entry in flight per group: commit latency with little load;
- single: one claim per entry, 256 in flight per group: committed entries/s (= claims/s);
- batched: 1,000 claims per entry (the node's claim_batch_size), 4 in flight: claims/s.

Each claim is the next slot of its job, so every one is applied as a new queued run. A figure
counts what the leader's core applied (the proposal's future resolved, the run queued) within
the measured window, after a warm-up; latency is propose() to that resolution; CPU is each
process's user + system time over the window (os.times), in cores.

Checks (exit status 1): every claim is queued (none refused or out of plan), every replica of a
group ends at one state digest at one index holding exactly the runs its leader saw committed,
and no process log has a CRITICAL line or pysyncobj's "truncating already-applied".
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import secrets
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench._harness.common import (
    PortAllocator,
    fmt,
    load_average,
    median,
    percentile,
    print_table,
    raft_sync_mode,
    raise_on_sigterm,
    scan_logs,
)
from bench._harness.rawraft import stop_processes
from bench._harness.report import bench_parser, finish, log, new_report
from scheduler.core.commands import ApplyJobs, ClaimLeadership, ClaimRuns, JobUpsert, SlotClaim
from scheduler.core.model import QUEUED, JobSpec
from scheduler.core.results import RunClaimed

JOBS_PER_GROUP = 1_000
NODES = 3
NODE_LOG = "node.log"
DRAIN_S = 5.0  # after a window, how long outstanding proposals may take to resolve (a lost leader never answers some)


@dataclass(frozen=True)
class Phase:
    name: str
    claims_per_entry: int
    in_flight: int
    seconds: float


def phases(quick: bool) -> list[Phase]:
    return [
        Phase("paced", 1, 1, 1.0 if quick else 3.0),
        Phase("single", 1, 256, 2.5 if quick else 8.0),
        Phase("batched", 1_000, 4, 2.0 if quick else 6.0),
    ]


# -- the workload (pure: tests/unit/project/test_bench_groups.py applies it to the core) -------------
def job_specs(group: int, tag: str, count: int = JOBS_PER_GROUP) -> list[JobSpec]:
    return [
        JobSpec(id=f"g{group}-{tag}-{i:05d}", schedule="* * * * * *", target_kind="handler", target="bench.noop")
        for i in range(count)
    ]


def setup_commands(specs: list[JobSpec], node_id: str, term: int, now_us: int, mono_us: int) -> tuple:
    """Open an epoch, then add the jobs with their first slot 1 us after the apply."""
    leadership = ClaimLeadership(issued_at_us=now_us, node_id=node_id, term=term, monotonic_us=mono_us)
    upserts = tuple(JobUpsert(spec=spec, expected_version=0, next_due_us=now_us + 1) for spec in specs)
    apply = ApplyJobs(issued_at_us=now_us, author="bench", request_id=secrets.token_hex(8), upserts=upserts)
    return leadership, apply


class ClaimStream:
    """ClaimRuns the core accepts, in proposal order: round robin over the jobs, each claim the
    job's next slot. The core does not replan a claim (the proposer's planning is trusted), so
    slots 1 us apart are as good as a schedule's: distinct run keys, all due at once, and all
    within the minute after which a claim would also raise a late alert."""

    def __init__(self, job_ids: list[str], first_slot_us: int, epoch: int) -> None:
        self.job_ids = job_ids
        self.epoch = epoch
        self._next = dict.fromkeys(job_ids, first_slot_us)
        self._turn = 0

    def next_command(self, count: int, now_us: int, mono_us: int) -> ClaimRuns:
        claims = []
        for _ in range(count):
            job_id = self.job_ids[self._turn]
            self._turn = (self._turn + 1) % len(self.job_ids)
            slot = self._next[job_id]
            self._next[job_id] = slot + 1
            claims.append(SlotClaim(job_id, slot, slot + 1, 1))
        return ClaimRuns(issued_at_us=now_us, epoch=self.epoch, claims=tuple(claims), monotonic_us=mono_us)


def queued_claims(result) -> int:
    return sum(1 for e in result.events if type(e) is RunClaimed and e.status == QUEUED)


# -- a node process holding one replica of one or more groups ----------------------------------------
def _now_us() -> tuple[int, int]:
    return time.time_ns() // 1000, time.monotonic_ns() // 1000


def _drive(raftlog, stream: ClaimStream, phase: Phase, start: float, warm_s: float) -> dict:
    """Propose from this thread with `phase.in_flight` proposals outstanding until the window
    ends, then wait for the outstanding ones. Times are CLOCK_MONOTONIC, shared by processes."""
    from scheduler.replication import ReplicationError

    permits = threading.Semaphore(phase.in_flight)
    lock = threading.Lock()
    done: list[tuple[float, float, int]] = []  # (proposed, resolved, queued claims)
    failures: Counter = Counter()
    begin, end = start + warm_s, start + warm_s + phase.seconds

    lost = threading.Event()
    lost_at: list[float] = []

    def lose(at: float) -> None:
        with lock:
            lost_at.append(at)
        lost.set()

    def on_done(future, proposed: float, claims: int) -> None:
        resolved = time.monotonic()
        try:
            result = future.result()
        except Exception as exc:  # e.g. the leader changed: this group stops being driven
            with lock:
                failures[type(exc).__name__] += 1
            lose(resolved)
        else:
            queued = queued_claims(result)
            with lock:
                done.append((proposed, resolved, queued))
                if result.rejection is not None:
                    failures[f"rejected {result.rejection.code}"] += 1
                elif queued != claims:  # out of plan: after a lost entry, its jobs' next slots
                    failures["claims not queued"] += claims - queued
        permits.release()

    time.sleep(max(0.0, start - time.monotonic()))
    while time.monotonic() < end and not lost.is_set():
        if not permits.acquire(timeout=1.0):
            continue
        command = stream.next_command(phase.claims_per_entry, *_now_us())
        proposed = time.monotonic()
        try:
            future = raftlog.propose(command)
        except ReplicationError as exc:
            failures[type(exc).__name__] += 1
            lose(time.monotonic())
            permits.release()
            break
        future.add_done_callback(lambda f, p=proposed, n=phase.claims_per_entry: on_done(f, p, n))
    drained = all(permits.acquire(timeout=max(0.1, end + DRAIN_S - time.monotonic())) for _ in range(phase.in_flight))
    if not drained:
        lose(time.monotonic())
    with lock:
        inside = [(p, r, q) for p, r, q in done if begin <= r <= end]
        latencies_ms = [(r - p) * 1000 for p, r, _ in done if begin <= p <= end]
        return {
            "entries": len(inside),
            "claims": sum(q for _, _, q in inside),
            "claims_total": sum(q for _, _, q in done),
            "latency_p50_ms": percentile(latencies_ms, 50),
            "latency_p99_ms": percentile(latencies_ms, 99),
            "failures": dict(failures) if drained else {**failures, "not drained": 1},
            "stopped_after_s": round(min(lost_at) - begin, 2) if lost_at else None,
        }


def _node_main(replicas: list[tuple[int, int]], addresses: list[list[str]], passwords: list[str], root: str, conn):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    from scheduler.replication import RaftLog, RaftSettings, RaftTuning

    logging.basicConfig(
        filename=str(Path(root) / NODE_LOG),
        level=logging.INFO,
        format=f"%(asctime)s pid{os.getpid()} %(levelname)s %(threadName)s %(name)s: %(message)s",
    )
    tuning = RaftTuning(sync=raft_sync_mode() == "on")
    logs: dict[int, RaftLog] = {}
    for group, node in replicas:
        settings = RaftSettings(
            self_address=addresses[group][node],
            partner_addresses=tuple(a for i, a in enumerate(addresses[group]) if i != node),
            data_dir=Path(root) / f"g{group}",
            password=passwords[group],
            tuning=tuning,
        )
        logs[group] = RaftLog(settings)
        logs[group].start()
    conn.send(("ready", None))
    streams: dict[int, ClaimStream] = {}

    def status() -> dict:
        return {
            g: {
                "leader": raftlog.is_leader(),
                "leader_address": raftlog.leader_address(),
                "quorum": raftlog.has_quorum(),
                "term": raftlog.term,
                "commit": raftlog.commit_index,
                "applied": raftlog.applied_index,
            }
            for g, raftlog in logs.items()
        }

    def transfer(group: int, target: str) -> bool:
        syncobj = logs[group]._syncobj
        sent = threading.Event()

        def on_tick() -> None:  # pysyncobj's transport belongs to its tick thread
            if not sent.is_set():
                sent.set()
                syncobj.transferLeadership(node=target, callback=lambda _r, _e: None)

        syncobj.addOnTickCallback(on_tick)
        try:
            return sent.wait(5.0)
        finally:
            syncobj.removeOnTickCallback(on_tick)

    def setup(group: int, node_id: str, tag: str) -> dict:
        """A new epoch and new jobs for each phase, so a phase never inherits another's lost entry."""
        raftlog = logs[group]
        specs = job_specs(group, tag)
        leadership, apply = setup_commands(specs, node_id, raftlog.term, *_now_us())
        for command in (leadership, apply):
            result = raftlog.propose(command).result(timeout=30)
            if result.rejection is not None:
                raise RuntimeError(f"{type(command).__name__} refused: {result.rejection}")
        with raftlog.read() as state:
            epoch = state.epoch
        streams[group] = ClaimStream([s.id for s in specs], apply.issued_at_us + 1, epoch)
        return {"epoch": epoch}

    def load(phase: Phase, start: float, warm_s: float, drive: list[int]) -> dict:
        out: dict = {}
        threads = [
            threading.Thread(
                target=lambda g=g: out.__setitem__(g, _drive(logs[g], streams[g], phase, start, warm_s)),
                name=f"drive-g{g}",
            )
            for g in drive  # set up here for this phase, even if an election moved the leader since
        ]
        for thread in threads:
            thread.start()
        time.sleep(max(0.0, start + warm_s - time.monotonic()))
        cpu_before = os.times()
        time.sleep(max(0.0, start + warm_s + phase.seconds - time.monotonic()))
        cpu_after = os.times()
        for thread in threads:
            thread.join()
        cpu_s = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
        return {"groups": out, "cpu_cores": cpu_s / phase.seconds}

    def digest() -> dict:
        result = {}
        for g, raftlog in logs.items():
            index, value = raftlog.digest_at()
            with raftlog.read() as state:
                runs = state.run_count
            result[g] = {"index": index, "digest": value, "runs": runs, "commit": raftlog.commit_index}
        return result

    def stalls() -> dict:
        return {g: raftlog.tick_stalls() for g, raftlog in logs.items()}

    handlers = {
        "status": status,
        "transfer": transfer,
        "setup": setup,
        "load": load,
        "digest": digest,
        "stalls": stalls,
    }
    try:
        while True:
            try:
                if not conn.poll(1.0):
                    continue
                op, args = conn.recv()
            except (EOFError, OSError):
                break
            if op == "stop":
                break
            try:
                conn.send(("ok", handlers[op](*args)))
            except Exception as exc:  # reported to the parent instead of dying silently
                logging.getLogger("bench").exception("%s failed", op)
                conn.send(("error", repr(exc)))
    finally:
        for raftlog in logs.values():
            with contextlib.suppress(Exception):
                raftlog.close()
        conn.close()


# -- the parent ------------------------------------------------------------------------------------------
def group_ports(base: int, groups: int) -> list[list[int]]:
    return [[base + 10 * g + n + 1 for n in range(NODES)] for g in range(groups)]


class GroupCluster:
    """G groups of three replicas on loopback, laid out `shared` (3 processes) or `split` (3 x G)."""

    def __init__(self, root: Path, groups: int, layout: str, port_base: int) -> None:
        self.root, self.groups, self.layout = root, groups, layout
        self.addresses = [[f"127.0.0.1:{p}" for p in ports] for ports in group_ports(port_base, groups)]
        self.passwords = [secrets.token_hex(24) for _ in range(groups)]
        if layout == "shared":
            self.placement = [[(g, n) for g in range(groups)] for n in range(NODES)]
        else:
            self.placement = [[(g, n)] for g in range(groups) for n in range(NODES)]
        self._processes: list = []
        self._conns: list = []
        self.drivers: list[list[int]] = [[] for _ in self.placement]  # per process: the groups it proposes to

    def proc_dir(self, index: int) -> Path:
        return self.root / f"p{index + 1}"

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        for index, replicas in enumerate(self.placement):
            self.proc_dir(index).mkdir(parents=True, exist_ok=True)
            parent_end, child_end = ctx.Pipe()
            process = ctx.Process(
                target=_node_main,
                args=(replicas, self.addresses, self.passwords, str(self.proc_dir(index)), child_end),
                name=f"groups-p{index + 1}",
                daemon=True,
            )
            process.start()
            child_end.close()
            self._processes.append(process)
            self._conns.append(parent_end)
        for index, conn in enumerate(self._conns):  # importing and opening journals takes a while
            if not conn.poll(120) or conn.recv()[0] != "ready":
                raise TimeoutError(f"process p{index + 1} did not start within 120s; see {self.proc_dir(index)}")

    def call(self, index: int, op: str, *args, timeout_s: float = 60.0):
        conn = self._conns[index]
        try:
            conn.send((op, args))
            if not conn.poll(timeout_s):
                raise TimeoutError(f"process p{index + 1} did not answer {op} within {timeout_s}s")
            kind, value = conn.recv()
        except (EOFError, OSError) as exc:
            raise RuntimeError(f"process p{index + 1} is gone ({exc!r}); see {self.proc_dir(index)}") from None
        if kind != "ok":
            raise RuntimeError(f"process p{index + 1} failed {op}: {value}")
        return value

    def call_all(self, op: str, *args, timeout_s: float = 60.0, extra: list | None = None) -> list:
        """Send to every process first, then collect: the processes work at the same time.
        `extra`, one per process, is appended to that process's arguments."""
        for index, conn in enumerate(self._conns):
            conn.send((op, args + ((extra[index],) if extra is not None else ())))
        answers = []
        for index, conn in enumerate(self._conns):
            if not conn.poll(timeout_s):
                raise TimeoutError(f"process p{index + 1} did not answer {op} within {timeout_s}s")
            kind, value = conn.recv()
            if kind != "ok":
                raise RuntimeError(f"process p{index + 1} failed {op}: {value}")
            answers.append(value)
        return answers

    def process_of(self, group: int, node: int) -> int:
        return next(i for i, replicas in enumerate(self.placement) if (group, node) in replicas)

    def leaders(self) -> dict[int, int]:
        """group -> node that leads it, for the groups every replica agrees on."""
        seen: dict[int, list[tuple[int, dict]]] = {}
        for index, answer in enumerate(self.call_all("status", timeout_s=10)):
            for group, status in answer.items():
                node = next(n for g, n in self.placement[index] if g == group)
                seen.setdefault(group, []).append((node, status))
        found = {}
        for group, replicas in seen.items():
            leading = [n for n, s in replicas if s["leader"] and s["quorum"]]
            wanted = self.addresses[group][leading[0]] if len(leading) == 1 else None
            if wanted and all(s["leader_address"] == wanted for _, s in replicas):
                found[group] = leading[0]
        return found

    def place_leaders(self, timeout_s: float) -> dict[int, int]:
        """Group g led from node g mod 3; returns how many transfers each group took."""
        deadline = time.monotonic() + timeout_s
        transfers: Counter = Counter()
        last_request: dict[int, float] = {}
        while True:
            if not all(p.is_alive() for p in self._processes):
                raise RuntimeError(f"a process exited; see {self.root}")
            found = self.leaders()
            if len(found) == self.groups and all(found[g] == g % NODES for g in range(self.groups)):
                return dict(transfers)
            if time.monotonic() > deadline:
                raise TimeoutError(f"leaders not in place within {timeout_s}s: {found}")
            for group, node in found.items():
                target = group % NODES
                if node != target and time.monotonic() - last_request.get(group, 0.0) > 2.0:
                    last_request[group] = time.monotonic()
                    transfers[group] += 1
                    self.call(self.process_of(group, node), "transfer", group, self.addresses[group][target])
            time.sleep(0.1)

    def setup(self, tag: str) -> None:
        self.drivers = [[] for _ in self.placement]
        for group in range(self.groups):
            node = group % NODES
            self.call(self.process_of(group, node), "setup", group, f"n{node + 1}", tag, timeout_s=60)
            self.drivers[self.process_of(group, node)].append(group)

    def terms(self) -> dict[int, int]:
        """group -> the highest Raft term any of its replicas has seen."""
        found: dict[int, int] = {}
        for answer in self.call_all("status", timeout_s=30):
            for group, status in answer.items():
                found[group] = max(found.get(group, 0), status["term"])
        return found

    def load(self, phase: Phase, warm_s: float) -> list[dict]:
        start = time.monotonic() + 0.3
        return self.call_all("load", phase, start, warm_s, timeout_s=warm_s + phase.seconds + 60, extra=self.drivers)

    def converged(self, timeout_s: float) -> dict[int, dict]:
        """Per group: the one (index, digest, runs) every replica reached, or what they disagree on."""
        deadline = time.monotonic() + timeout_s
        while True:
            by_group: dict[int, set] = {}
            for answer in self.call_all("digest", timeout_s=timeout_s):
                for group, d in answer.items():
                    by_group.setdefault(group, set()).add((d["index"], d["digest"], d["runs"], d["commit"]))
            agreed = {g: next(iter(v)) for g, v in by_group.items() if len(v) == 1}
            if len(agreed) == self.groups or time.monotonic() > deadline:
                return {g: {"agree": g in agreed, "replicas": sorted(by_group[g])} for g in sorted(by_group)}
            time.sleep(0.5)

    def log_problems(self) -> list[str]:
        return scan_logs(self.proc_dir(i) / NODE_LOG for i in range(len(self.placement)))

    def stop(self) -> None:
        stop_processes(self._processes, self._conns, timeout_s=15)
        self._processes, self._conns = [], []

    def __enter__(self) -> GroupCluster:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def run_config(root: Path, groups: int, layout: str, port_base: int, quick: bool) -> dict:
    out: dict = {"groups": groups, "layout": layout, "port_base": port_base, "phases": {}, "problems": []}
    warm_s = 0.5 if quick else 1.0
    name = f"{groups}g-{layout}"
    cluster = GroupCluster(root / f"{name}-{port_base}", groups, layout, port_base)  # fresh: a baseline runs twice
    out["processes"] = len(cluster.placement)
    started = time.monotonic()
    try:
        cluster.start()
        out["transfers"] = cluster.place_leaders(90)
        out["s_to_placed_leaders"] = round(time.monotonic() - started, 1)
        committed: Counter = Counter()
        lost: set[int] = set()
        for phase in phases(quick):
            # A leader may have moved in the previous phase (an election under load): back in place.
            out.setdefault("transfers_before", {})[phase.name] = cluster.place_leaders(60)
            cluster.setup(phase.name)
            out["load_before_" + phase.name] = load_average()
            terms = cluster.terms()
            answers = cluster.load(phase, warm_s)
            elections = {g: t - terms[g] for g, t in cluster.terms().items()}
            merged = {g: r for answer in answers for g, r in answer["groups"].items()}
            for group, r in merged.items():
                committed[group] += r["claims_total"]
                r["elections"] = elections.get(group, 0)
                if r["failures"]:
                    lost.add(group)
                    log(f"{name} {phase.name} group {group}: {r['failures']}, stopped after {r['stopped_after_s']}s")
            out["phases"][phase.name] = {
                "groups": {g: merged[g] for g in sorted(merged)},
                "cpu_cores": [round(a["cpu_cores"], 2) for a in answers],
                "seconds": phase.seconds,
                "load": load_average(),
            }
            per_s = [merged[g]["claims"] / phase.seconds for g in sorted(merged)]
            log(
                f"{name} {phase.name}: claims/s per group {' '.join(fmt(x) for x in per_s)}, "
                f"CPU per process {' '.join(fmt(a['cpu_cores']) for a in answers)} cores, "
                f"elections {sum(elections.values())}"
            )
        agreement = cluster.converged(90)
        out["replicas"] = agreement
        for group, seen in agreement.items():
            if not seen["agree"]:
                out["problems"].append(f"{name} group {group}: replicas disagree: {seen['replicas']}")
            elif seen["replicas"][0][2] < committed[group] or (
                group not in lost and seen["replicas"][0][2] != committed[group]
            ):  # a proposal whose outcome the leader lost may still have committed
                out["problems"].append(
                    f"{name} group {group}: replicas hold {seen['replicas'][0][2]} runs, "
                    f"the leader saw {committed[group]} claims committed"
                )
        log(f"{name}: replicas agree per group: {[seen['agree'] for seen in agreement.values()]}")
        out["tick_stalls"] = cluster.call_all("stalls", timeout_s=10)
    except Exception as exc:
        out["problems"].append(f"{name} failed: {exc!r}")
        log(traceback.format_exc())
    finally:
        cluster.stop()
        bad = cluster.log_problems()
        if bad:
            out["problems"].append(f"{name}: process logs contain {len(bad)} bad line(s): " + " | ".join(bad[:3]))
    out["elapsed_s"] = round(time.monotonic() - started, 1)
    return out


# -- the report ------------------------------------------------------------------------------------------
def summarize(configs: list[dict]) -> tuple[list[list], dict]:
    baselines = [c for c in configs if c["groups"] == 1 and c["phases"]]
    rows, summary = [], {}
    for phase in ("single", "batched", "paced"):
        # The median of the baseline runs (first and last of a full run: the load may drift between).
        base_aggregate = median(
            sum(r["claims"] for r in c["phases"][phase]["groups"].values()) / c["phases"][phase]["seconds"]
            for c in baselines
            if phase in c["phases"]
        )
        for c in configs:
            figures = c["phases"].get(phase)
            if not figures:
                continue
            seconds = figures["seconds"]
            groups = [figures["groups"][g] for g in sorted(figures["groups"])]
            per_group = [r["claims"] / seconds for r in groups]
            entries = [r["entries"] / seconds for r in groups]
            aggregate = sum(per_group)
            run = f" (run {baselines.index(c) + 1})" if len(baselines) > 1 and c in baselines else ""
            label = f"{phase}: {c['groups']} group{'s' if c['groups'] > 1 else ''}, " + (
                f"baseline{run}" if c["groups"] == 1 else f"{c['layout']} ({c['processes']} processes)"
            )
            key = f"{phase}_{c['groups']}g_{c['layout']}" + run.replace(" (run ", "_run").rstrip(")")
            summary[key] = {
                "claims_per_s_per_group": per_group,
                "entries_per_s_per_group": entries,
                "aggregate_claims_per_s": aggregate,
                "p50_ms": [r["latency_p50_ms"] for r in groups],
                "p99_ms": [r["latency_p99_ms"] for r in groups],
                "cpu_cores": figures["cpu_cores"],
                "elections": [r.get("elections", 0) for r in groups],
                "stopped_after_s": [r["stopped_after_s"] for r in groups],
            }
            stopped = [
                f"g{g} at {r['stopped_after_s']}s" for g, r in enumerate(groups) if r["stopped_after_s"] is not None
            ]
            rows.append(
                [
                    label,
                    median(per_group),
                    " ".join(fmt(x) for x in per_group),
                    aggregate,
                    f"{aggregate / base_aggregate:.2f}x" if base_aggregate else "-",
                    " ".join(f"{fmt(r['latency_p50_ms'])}/{fmt(r['latency_p99_ms'])}" for r in groups),
                    " ".join(fmt(x) for x in figures["cpu_cores"]),
                    sum(figures["cpu_cores"]),
                    f"{sum(r.get('elections', 0) for r in groups)}"
                    + (f" (lost: {', '.join(stopped)})" if stopped else ""),
                ]
            )
    return rows, summary


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(
        "groups", __doc__, port_base=8400, quick_help="1 and 3 groups, shorter phases (under a minute)"
    )
    parser.add_argument("--groups", help="comma-separated group counts (default 1,2,3; 1,3 with --quick)")
    parser.add_argument("--layouts", default="shared,split", help="comma-separated: shared, split")
    args = parser.parse_args(argv)
    counts = [int(x) for x in (args.groups or ("1,3" if args.quick else "1,2,3")).split(",") if x]
    layouts = [x for x in args.layouts.split(",") if x]
    if not set(layouts) <= {"shared", "split"} or not counts or min(counts) < 1 or max(counts) > 9:
        parser.error("bad --groups or --layouts")
    raise_on_sigterm()
    root = Path(tempfile.mkdtemp(prefix="raftcron-bench-groups-"))
    ports = PortAllocator(args.port_base, step=100, limit=2000)
    report = new_report(
        "groups",
        args.quick,
        raft_sync=raft_sync_mode(),
        jobs_per_group=JOBS_PER_GROUP,
        phases=[p.__dict__ for p in phases(args.quick)],
        configs=[],
    )
    plan = [(1, "shared")] if 1 in counts else []
    plan += [(g, layout) for g in sorted(set(counts) - {1}) for layout in layouts]
    if 1 in counts and len(plan) > 1 and not args.quick:
        plan.append((1, "shared"))  # the baseline again at the end: how far the machine's load drifted
    interrupted = False
    try:
        log(f"groups: {plan}, journal sync {raft_sync_mode()}, data under {root}")
        for groups, layout in plan:
            base = ports.take(lambda b, g=groups: [p for ports_ in group_ports(b, g) for p in ports_])
            report["configs"].append(run_config(root, groups, layout, base, args.quick))
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: every process was stopped")
    report["load_after"] = load_average()
    report["problems"] = [p for c in report["configs"] for p in c["problems"]]
    if any(c["phases"] for c in report["configs"]):
        rows, report["summary"] = summarize(report["configs"])
        title = (
            f"groups: claims committed per second per Raft group, 3 nodes on loopback, journal sync "
            f"{raft_sync_mode()}, {os.cpu_count()} cores, load {report['load_after']}"
        )
        headers = [
            "phase: groups, layout",
            "per group",
            "each group",
            "aggregate",
            "vs 1",
            "p50/p99 ms",
            "CPU/process",
            "CPU",
            "elections",
        ]
        report["table"] = print_table(headers, rows, title=title)
    report["interrupted"] = interrupted
    if report["code"]["dirty"]:
        log(f"note: the node code had uncommitted changes: {report['code']['dirty']}")
    return finish("groups", report, root, interrupted, args.keep)


if __name__ == "__main__":
    sys.exit(main())
