"""What a power cut leaves of a node's Raft directory, decided from what the node synced.

A SIGKILL keeps everything a node wrote (the page cache survives it); a power cut keeps only
what reached the disk. The node tells us what that was: with `RAFTCRON_SYNC_TRACE` naming a
file, it overwrites that file after every successful journal sync with the journal's inode
and synced length (`struct.pack("<QQ", st_ino, length)`, no fsync of its own: it is an
oracle for the test, not state). Its dump and meta files are replaced whole by rename, synced
first, when syncing is on.

`plan()` is the pure rule (files and trace in, each file's fate out); `cut()` applies it to a
directory whose node is dead, and `record()` keeps a copy of a directory as the disk holds it
(the scenario's start, and what survived the last cut) for the files the node never synced.
"""

from __future__ import annotations

import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from scheduler.replication.journal import (
    JOURNAL_NAME,
    LEGACY_JOURNAL_NAME,
    RECORD_HEADER_BYTES,
    TRACE_ENV,  # noqa: F401 (the harness names the trace variable through this module)
    encode_record,
    scan,
)

TRACE_FORMAT = "<QQ"  # inode of the journal file, bytes of it synced
JOURNAL_NAMES = (JOURNAL_NAME, LEGACY_JOURNAL_NAME)
# A torn write keeps at most this many bytes past the synced length: a record's header and
# part of its body, never a whole batch.
MAX_TEAR_BYTES = 256


@dataclass(frozen=True)
class Tear:
    """What reaches the disk of the write in flight when the power fails: its first
    `kept_bytes`, or (`zeros`) as many bytes as it had, only the first `kept_bytes` written."""

    kept_bytes: int = 0
    zeros: bool = False


NO_TEAR = Tear()


@dataclass(frozen=True)
class FileFacts:
    inode: int
    size_bytes: int


@dataclass(frozen=True)
class Fate:
    """keep | truncate to `length_bytes` (`dropped_bytes` after it thrown away; then `torn_bytes`
    of a next record, when the node had written none of it) | restore the recorded copy | remove."""

    action: str
    length_bytes: int = 0
    dropped_bytes: int = 0
    torn_bytes: int = 0


KEEP = Fate("keep")
RESTORE = Fate("restore")
REMOVE = Fate("remove")


def read_trace(path: Path) -> tuple[int, int] | None:
    """(inode, synced length) from a trace file, or None when there is none (nothing synced)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if len(data) != struct.calcsize(TRACE_FORMAT):
        raise ValueError(f"{path}: {len(data)} bytes, a sync trace has {struct.calcsize(TRACE_FORMAT)}")
    return struct.unpack(TRACE_FORMAT, data)


def plan(
    files: dict[str, FileFacts],
    recorded: frozenset[str],
    trace: tuple[int, int] | None,
    synced: bool,
    tear_bytes: int = 0,
) -> dict[str, Fate]:
    """Each file's fate in a power cut, and the recorded files that come back.

    `files`: the directory now; `recorded`: the names in its last recorded copy (what the disk
    held before this node ran); `trace`: the node's last sync; `synced`: the node runs with
    syncing on; `tear_bytes`: how much of the first unsynced record survives (a torn write).
    """
    fates: dict[str, Fate] = {}
    if not synced:
        # Nothing was ever synced: the disk holds what it held before the node ran.
        for name in files:
            fates[name] = RESTORE if name in recorded else REMOVE
        for name in recorded - set(files):
            fates[name] = RESTORE
        return fates
    for name, facts in files.items():
        if name not in JOURNAL_NAMES:
            fates[name] = KEEP  # the dump and meta are synced, then renamed in whole
        elif trace is not None and trace[0] == facts.inode:
            if facts.size_bytes > trace[1]:  # written, not yet synced: a few of those bytes may have landed
                length = min(facts.size_bytes, trace[1] + tear_bytes)
                fates[name] = Fate("truncate", length, facts.size_bytes - length)
            else:  # the next write was still in memory: it lands torn, if at all
                torn = tear_bytes if name == JOURNAL_NAME else 0
                fates[name] = Fate("truncate", trace[1], torn_bytes=torn)
        elif trace is not None:
            fates[name] = KEEP  # renamed in after the traced sync: it was synced whole first
        else:
            # Not synced since the node started: what the disk held before it did.
            fates[name] = RESTORE if name in recorded else REMOVE
    return fates


def torn_record(journal: bytes, tear: Tear) -> bytes:
    """The part of a record a node could have been writing next (the last entry's payload at
    the next index) that reaches the disk: never all of it, so it is always a torn tail (a
    partial record, or one whose checksum fails), never an entry the node did not write.
    A zero-filled record keeps its header whole: the journal reads a record header cut by
    zeros as corruption, not as a torn tail (see docs/design/power-loss-test.md)."""
    entries = scan(journal, JOURNAL_NAME).entries
    payload, index, term = entries[-1] if entries else (b"\x01" * 64, 0, 0)
    record = encode_record(payload, index + 1, term)
    size = max(RECORD_HEADER_BYTES if tear.zeros else 1, min(tear.kept_bytes, len(record) - 1))
    return record[:size] + (b"\0" * (len(record) - size) if tear.zeros else b"")


def facts_of(directory: Path) -> dict[str, FileFacts]:
    facts = {}
    for path in directory.iterdir() if directory.exists() else ():
        if path.is_file():
            stat = path.stat()
            facts[path.name] = FileFacts(stat.st_ino, stat.st_size)
    return facts


def record(directory: Path, copy: Path) -> None:
    """Keep `directory` as the disk holds it now: what a later cut restores of unsynced files."""
    shutil.rmtree(copy, ignore_errors=True)
    copy.mkdir(parents=True)
    for name in facts_of(directory):
        shutil.copy2(directory / name, copy / name)


def cut(directory: Path, copy: Path, trace_path: Path, synced: bool, tear: Tear = NO_TEAR) -> dict[str, Fate]:
    """Throw away what a dead node had not synced; the fates applied. The trace goes too (it
    described the files before the cut), and what is left becomes the new recorded copy."""
    recorded = frozenset(facts_of(copy))
    fates = plan(facts_of(directory), recorded, read_trace(trace_path), synced, tear.kept_bytes)
    directory.mkdir(parents=True, exist_ok=True)
    for name, fate in fates.items():
        path = directory / name
        if fate.action == "truncate":
            os.truncate(path, fate.length_bytes)
            if fate.torn_bytes:
                with open(path, "r+b") as journal:
                    torn = torn_record(journal.read(), Tear(fate.torn_bytes, tear.zeros))
                    journal.write(torn)
        elif fate.action == "remove":
            path.unlink()
        elif fate.action == "restore":
            # In place, so the file keeps its inode as the node had it open.
            with open(copy / name, "rb") as source, open(path, "ab") as target:
                target.truncate(0)
                shutil.copyfileobj(source, target)
    trace_path.unlink(missing_ok=True)
    record(directory, copy)
    return fates
