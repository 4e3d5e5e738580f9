"""A compaction child never writes an older dump over a newer one.

pysyncobj compacts in a forked child that pickles the state to `raft.dump.tmp` and renames it
over `raft.dump`; the parent cuts its journal to the dump only when it later sees the child
succeed. Two ways let an older dump land last:

- *A snapshot installed meanwhile.* A follower that falls behind the leader's compacted log is
  sent the leader's snapshot, which pysyncobj renames over `raft.dump` and follows with a journal
  that starts there. If this node's own compaction child, still serializing an older state,
  renames after that, the dump is older than the journal's start. At the next start pysyncobj
  finds a journal that does not follow its dump, clears it and clamps its commit index: every
  entry the node had acknowledged since the older dump is gone from its disk. Seen in
  `python -m bench scale` with a million jobs, whose compaction children ran for up to 82 s.
- *A parent killed meanwhile.* The child outlives a SIGKILLed node and renames its dump while the
  restarted node runs on the journal it found; one more restart and the journal no longer
  follows the dump.

So the child is stopped before an installed snapshot is renamed into place (the next compaction
starts afresh from the installed state), and the child dies with the thread that forked it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal

from scheduler.replication.pysyncobj_compat import SERIALIZER, SERIALIZER_PID

log = logging.getLogger("raftcron.replication")

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def guard_snapshot_installs(syncobj) -> None:
    """Stop `syncobj`'s compaction child before pysyncobj renames an installed snapshot."""
    serializer = getattr(syncobj, SERIALIZER)
    install = serializer.setTransmissionData

    def guarded(data):
        if data is not None and data[2]:  # the last chunk: pysyncobj renames the dump next
            stop_compaction_child(serializer)
        return install(data)

    serializer.setTransmissionData = guarded


def stop_compaction_child(serializer) -> bool:
    """SIGKILL and reap the serializer's child, if one runs; True when one did."""
    pid = getattr(serializer, SERIALIZER_PID)
    if pid <= 0:  # 0: none; -1, -2: an in-process serialization's outcome, not a child
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    setattr(serializer, SERIALIZER_PID, 0)  # pysyncobj's "not serializing": it compacts again later
    log.warning("compaction child %d stopped: a snapshot from the leader replaces the state it was writing", pid)
    return True


def die_with_parent(parent_pid: int) -> None:
    """In a forked child: be killed when the thread that forked it ends (Linux), and end now if
    that parent is already gone."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)
