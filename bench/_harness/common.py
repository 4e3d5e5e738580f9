"""Helpers shared by the benchmarks: statistics, a table printer, JSON output, machine facts,
free loopback ports, node-log scanning and clean shutdown on SIGTERM."""

from __future__ import annotations

import json
import math
import os
import platform
import re
import signal
import socket
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository root (this file is bench/_harness/common.py)
OUT_DIR = ROOT / "bench" / "out"

# pysyncobj's divergence warning, and anything logged at CRITICAL, fail a benchmark.
BAD_LOG_MARKERS = ("truncating already-applied", "CRITICAL")


# -- statistics ---------------------------------------------------------------------------------
def median(values: Iterable[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def percentile(values: Iterable[float], p: float) -> float | None:
    """The p-th percentile (0..100) with linear interpolation between closest ranks."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * p / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def max_in_window(times: list[float], window_s: float = 1.0) -> int:
    """The most events within any half-open window of `window_s` (sliding, at every event)."""
    ordered = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(ordered):
        while ordered[lo] <= t - window_s:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def max_concurrent(intervals: list[tuple[float, float]]) -> int:
    """The most intervals [start, end) open at once (an end before a start at the same instant)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    best = current = 0
    for _, step in events:
        current += step
        best = max(best, current)
    return best


# -- formatting -----------------------------------------------------------------------------------
def fmt(value, digits: int = 3) -> str:
    """A number for a table: thousands separators for large values, `digits` significant otherwise."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, int) or abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "", file=None) -> str:
    """Print an aligned text table (first column left-aligned, the others right-aligned); return it."""
    cells = [[str(h) for h in headers]] + [[c if isinstance(c, str) else fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    out = ([title] if title else []) + [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in cells[1:]]
    text = "\n".join(out)
    print(text, file=file or sys.stdout, flush=True)
    return text


def write_json(name: str, data: object) -> Path:
    """Write `data` to bench/out/<name> (the directory is git-ignored); return the path."""
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / name
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(path)
    return path


# -- the machine ----------------------------------------------------------------------------------
def load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages (other work on the machine skews every figure)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info() -> dict:
    cpu = ""
    try:
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                cpu = text.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        pysyncobj_version = metadata.version("pysyncobj")
    except metadata.PackageNotFoundError:
        pysyncobj_version = "?"
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu or platform.processor() or "?",
        "python": platform.python_version(),
        "pysyncobj": pysyncobj_version,
        "platform": platform.platform(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def code_revision(package_file: str) -> dict:
    """The git commit of the checkout a package was imported from, and its uncommitted changes."""
    import subprocess

    root = Path(package_file).resolve().parents[1]

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return done.stdout.rstrip("\n") if done.returncode == 0 else ""

    commit = git("rev-parse", "HEAD").strip()
    if not commit:
        return {"commit": "unknown (not a git checkout)", "dirty": []}
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "scheduler", "worker", "proto")
    return {"commit": commit, "dirty": [line[3:] for line in dirty.splitlines()]}


# -- loopback ports -------------------------------------------------------------------------------
# Which journal mode a run measures: "on" (the default: every acknowledged entry synced) or "off"
# (raft.sync false), so one benchmark can be run side by side in both modes.
RAFT_SYNC_ENV = "RAFTCRON_BENCH_RAFT_SYNC"


def raft_sync_mode() -> str:
    mode = os.environ.get(RAFT_SYNC_ENV, "on").strip().lower()
    if mode not in ("on", "off"):
        raise SystemExit(f"{RAFT_SYNC_ENV} must be 'on' or 'off', not {mode!r}")
    return mode


def with_raft_sync_mode(overrides: dict | None) -> dict:
    """`overrides` with raft.sync set from RAFTCRON_BENCH_RAFT_SYNC (a copy; other raft keys kept),
    unless the benchmark chose the mode itself (bench/journal.py measures both in one run)."""
    merged = dict(overrides or {})
    merged["raft"] = {"sync": raft_sync_mode() == "on", **merged.get("raft", {})}
    return merged


def ports_free(ports: Iterable[int], host: str = "127.0.0.1") -> bool:
    for port in ports:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                return False
    return True


def local_cluster_ports(base: int, nodes: int = 3) -> list[int]:
    """The ports a LocalCluster with this base binds: base+1.. (Raft) and base+101.. (gRPC)."""
    return [base + i for i in range(1, nodes + 1)] + [base + 100 + i for i in range(1, nodes + 1)]


class PortAllocator:
    """Hands out port bases from `start` upwards in steps of `step`, skipping ranges in use.

    Each cluster of a run gets fresh ports, so a socket of the previous cluster lingering in
    TIME_WAIT can never make the next one fail to bind.
    """

    def __init__(self, start: int, step: int = 10, limit: int = 90) -> None:
        self._next = start
        self._step = step
        self._limit = start + limit

    def take(self, ports_of) -> int:
        while self._next < self._limit:
            base, self._next = self._next, self._next + self._step
            if ports_free(ports_of(base)):
                return base
        raise RuntimeError(f"no free loopback port range below {self._limit}; pass another --port-base")


# -- logs ---------------------------------------------------------------------------------------
def scan_logs(paths: Iterable[Path], markers: Sequence[str] = BAD_LOG_MARKERS, keep: int = 5) -> list[str]:
    """Lines of the given log files that contain any marker, prefixed with the file's parent name."""
    found: list[str] = []
    for path in paths:
        if not Path(path).exists():
            continue
        for text in Path(path).read_text(errors="replace").splitlines():
            if any(marker in text for marker in markers):
                found.append(f"{Path(path).parent.name}/{Path(path).name}: {text.strip()}")
    return found[: keep * 10]


_STALL = re.compile(
    r"raft tick stalled ([0-9.]+)s as \w+.*?(?:\((\d+) more since the last warning, the longest ([0-9.]+)s\))?$"
)


def tick_stalls(paths: Iterable[Path]) -> dict[str, dict]:
    """Per node log (named by its directory): Raft ticks that started 0.25 s or more late, and the
    longest gap, from the nodes' "raft tick stalled" warnings (each also counts the ones it folded in)."""
    found: dict[str, dict] = {}
    for path in map(Path, paths):
        count, longest_s = 0, 0.0
        for text in path.read_text(errors="replace").splitlines() if path.exists() else ():
            if match := _STALL.search(text):
                count += 1 + int(match.group(2) or 0)
                longest_s = max(longest_s, float(match.group(1)), float(match.group(3) or 0))
        found[path.parent.name] = {"count": count, "longest_s": longest_s}
    return found


# -- shutdown -----------------------------------------------------------------------------------
def raise_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt so `finally` blocks stop every cluster we started."""

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
