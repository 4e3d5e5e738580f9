"""A compaction child never leaves an older dump over a newer one (compaction_child.py).

Both faults were reproduced against pysyncobj's own Serializer: each guarded test has a control
beside it that shows the fault happens without the guard."""

from __future__ import annotations

import gzip
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from scheduler.replication.compaction_child import guard_snapshot_installs
from scheduler.replication.pysyncobj_compat import SERIALIZER, SERIALIZER_PID, Serializer, raft_pickle
from scheduler.replication.pysyncobj_compat import syncobj_module as _syncobj_module

SERIALIZING = _syncobj_module.SERIALIZER_STATE.SERIALIZING
ROOT = Path(__file__).resolve().parents[3]


class _Gated:
    """Pickled in the compaction child: holds it until the gate file exists, like a large state."""

    def __init__(self, gate: Path, payload: bytes) -> None:
        self.gate, self.payload = gate, payload

    def __reduce__(self):
        deadline = time.monotonic() + 30
        while not self.gate.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        return (bytes, (self.payload,))


def _dump(snapshot: bytes) -> bytes:
    """A dump as pysyncobj writes and sends it: gzip of the pickled tuple."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb") as stream:
        raft_pickle.dump(({"snapshot": snapshot}, (b"e1", 2, 1), (b"e0", 1, 1), []), stream)
    return buffer.getvalue()


def _snapshot_in(path: Path) -> bytes:
    with gzip.open(path, "rb") as stream:
        return raft_pickle.load(stream)[0]["snapshot"]


def _install_during_a_compaction(tmp_path: Path, guarded: bool) -> bytes:
    """Start a compaction of an older state, install a newer snapshot, let the child finish."""
    dump = tmp_path / "raft.dump"
    serializer = Serializer(str(dump), 2**16, True, None, None, None)
    gate = tmp_path / "gate"
    serializer.serialize(({"snapshot": _Gated(gate, b"older")}, (b"e1", 2, 1), (b"e0", 1, 1), []), 1)
    child = getattr(serializer, SERIALIZER_PID)
    assert child > 0
    if guarded:
        guard_snapshot_installs(SimpleNamespace(**{SERIALIZER: serializer}))
    assert serializer.setTransmissionData((_dump(b"installed"), True, True))
    gate.touch()
    deadline = time.monotonic() + 30
    while serializer.checkSerializing()[0] == SERIALIZING:
        assert time.monotonic() < deadline, "the compaction child never ended"
        time.sleep(0.01)
    return _snapshot_in(dump)


def test_a_snapshot_installed_while_a_compaction_runs_stays_the_dump(tmp_path):
    assert _install_during_a_compaction(tmp_path, guarded=True) == b"installed"


def test_control_without_the_guard_the_older_compaction_overwrites_the_installed_snapshot(tmp_path):
    assert _install_during_a_compaction(tmp_path, guarded=False) == b"older"


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] not in ("Z", "X")  # a zombie waits for a reaper, it runs nothing


_FORKING_PARENT = """
import os, sys, time
from scheduler.replication.compaction_child import die_with_parent
parent = os.getpid()
pid = os.fork()
if pid == 0:
    if sys.argv[1] == "guarded":
        die_with_parent(parent)
    time.sleep(60)
    os._exit(0)
print(pid, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("guarded", [True, False])
def test_a_compaction_child_dies_with_its_killed_node(guarded):
    parent = subprocess.Popen(
        [sys.executable, "-c", _FORKING_PARENT, "guarded" if guarded else "control"],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        text=True,
    )
    child = int(parent.stdout.readline())
    try:
        # The child exists before the parent dies; a guard not yet set finds the parent gone and exits.
        deadline = time.monotonic() + 10
        while not Path(f"/proc/{child}/stat").exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while guarded and _alive(child):
            assert time.monotonic() < deadline, "the child outlived its killed parent"
            time.sleep(0.01)
        assert _alive(child) is not guarded
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
        parent.stdout.close()
