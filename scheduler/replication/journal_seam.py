"""Where raftcron puts its journal (journal.py) under pysyncobj, and every pysyncobj internal that
the durable journal relies on. tests/unit/replication/test_journal_seam.py pins how pysyncobj uses each of
them, and tests/unit/project/test_pysyncobj_compat.py that each name (pysyncobj_compat.py) still exists:
an upgrade of pysyncobj that moves one fails there, not as a silently unsynced cluster.

- `SyncObj.__init__` calls `createJournal(self.__conf.journalFile)`, looked up in
  `pysyncobj.syncobj`'s globals at call time. `install()` replaces that global, once, with a
  wrapper that builds our journal while `building(factory)` is active on the calling thread
  (raftlog's `_RaftcronSyncObj.__init__`), and pysyncobj's own journal otherwise.
- A follower answers appends through `SyncObj.__sendNextNodeIdx` (mangled, looked up on the
  instance, so a subclass can hold the answers until the entries are synced: SEND_NEXT_NODE_IDX
  in pysyncobj_compat.py). `follower_append.py` calls it too.
- `SyncObj._onTick` runs the leader's commit loop (which counts the leader itself for every
  entry it holds) before `_checkCommandsToApply` appends the tick's proposals, and ends with
  `self._poller.poll`, where messages are read and answered: a sync at the end of a tick covers
  both the follower's answers and the leader's next commit count.
- The dump (`Serializer`) is written to a temporary file and renamed without fsync; the journal
  syncs it before cutting the entries it replaces (`deleteEntriesTo`, `clear`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from scheduler.replication.pysyncobj_compat import (
    CREATE_JOURNAL,
    INSTALLED_VERSION,
    PYSYNCOBJ_VERSION,
    Journal,
    syncobj_module,
)

_original_create = getattr(syncobj_module, CREATE_JOURNAL)
_building = threading.local()


def _create_journal(journalFile=None):  # noqa: N803 (pysyncobj's name)
    factory = getattr(_building, "factory", None)
    if factory is None or journalFile is None:
        return _original_create(journalFile)
    return factory(journalFile)


def install() -> None:
    if INSTALLED_VERSION != PYSYNCOBJ_VERSION:
        raise RuntimeError(
            f"raftcron's journal is written against pysyncobj {PYSYNCOBJ_VERSION}, found {INSTALLED_VERSION}"
        )
    setattr(syncobj_module, CREATE_JOURNAL, _create_journal)


@contextlib.contextmanager
def building(factory: Callable[[str], Journal]) -> Iterator[None]:
    """While active, a SyncObj constructed on this thread gets `factory(journal_path)`."""
    install()
    _building.factory = factory
    try:
        yield
    finally:
        _building.factory = None
