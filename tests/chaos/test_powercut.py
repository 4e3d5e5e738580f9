"""A simulated power cut keeps what a node synced and nothing else (tests/chaos/powercut.py)."""

from __future__ import annotations

import os
import struct

import pytest

from scheduler.replication.journal import encode_header, encode_record, scan
from tests.chaos.powercut import (
    KEEP,
    REMOVE,
    RESTORE,
    Fate,
    FileFacts,
    Tear,
    cut,
    plan,
    read_trace,
    record,
    torn_record,
)

JOURNAL = "raft.wal"
FILES = {
    JOURNAL: FileFacts(inode=7, size_bytes=5000),
    "raft.dump": FileFacts(8, 900),
    "raft.wal.meta": FileFacts(9, 40),
}


def test_a_synced_journal_is_cut_at_its_traced_length():
    fates = plan(FILES, frozenset(), trace=(7, 3000), synced=True)
    assert fates == {JOURNAL: Fate("truncate", 3000, 2000), "raft.dump": KEEP, "raft.wal.meta": KEEP}


def test_a_torn_write_keeps_a_few_written_bytes_never_more_than_were_written():
    assert plan(FILES, frozenset(), (7, 3000), True, tear_bytes=17)[JOURNAL] == Fate("truncate", 3017, 1983)
    assert plan(FILES, frozenset(), (7, 4990), True, tear_bytes=64)[JOURNAL] == Fate("truncate", 5000, 0)


def test_a_journal_synced_to_its_end_gets_a_torn_next_record():
    assert plan(FILES, frozenset(), (7, 5000), True, tear_bytes=30)[JOURNAL] == Fate("truncate", 5000, 0, torn_bytes=30)
    assert plan(FILES, frozenset(), (7, 5000), True)[JOURNAL] == Fate("truncate", 5000, 0)


def test_a_journal_renamed_in_after_the_traced_sync_is_kept_whole():
    assert plan(FILES, frozenset(), trace=(6, 3000), synced=True)[JOURNAL] == KEEP


def test_a_journal_never_synced_comes_back_as_the_disk_held_it():
    assert plan(FILES, frozenset(), trace=None, synced=True)[JOURNAL] == REMOVE
    assert plan(FILES, frozenset({JOURNAL}), trace=None, synced=True)[JOURNAL] == RESTORE


def test_with_syncing_off_every_file_is_as_it_was_before_the_node_ran():
    fates = plan(FILES, frozenset({"raft.dump", "old.tmp"}), trace=None, synced=False)
    assert fates == {JOURNAL: REMOVE, "raft.dump": RESTORE, "raft.wal.meta": REMOVE, "old.tmp": RESTORE}


def _journal(*payloads: bytes) -> bytes:
    return encode_header() + b"".join(encode_record(p, i, 3) for i, p in enumerate(payloads, start=5))


@pytest.mark.parametrize(
    "tear",
    [
        Tear(1),
        Tear(23),
        Tear(24),
        Tear(200),
        Tear(400),
        Tear(1, zeros=True),
        Tear(10, zeros=True),
        Tear(200, zeros=True),
    ],
)
def test_a_torn_next_record_is_always_cut_at_start_never_read_as_an_entry(tear):
    journal = _journal(b"a" * 40, b"b" * 300)
    found = scan(journal + torn_record(journal, tear), JOURNAL)
    assert [e[1] for e in found.entries] == [5, 6]
    assert found.valid_bytes == len(journal) and found.torn


def _trace(path, journal, synced_bytes):
    path.write_bytes(struct.pack("<QQ", os.stat(journal).st_ino, synced_bytes))


def test_a_cut_truncates_the_journal_drops_the_trace_and_records_what_survived(tmp_path):
    raft, copy, trace = tmp_path / "raft", tmp_path / "copy", tmp_path / "n1.synctrace"
    raft.mkdir()
    record(raft, copy)  # the disk before the node ran: empty
    (raft / JOURNAL).write_bytes(b"a" * 600 + b"b" * 400)
    (raft / "raft.dump").write_bytes(b"dump")
    _trace(trace, raft / JOURNAL, 600)
    fates = cut(raft, copy, trace, synced=True, tear=Tear(10))
    assert fates[JOURNAL] == Fate("truncate", 610, 390)
    assert (raft / JOURNAL).read_bytes() == b"a" * 600 + b"b" * 10
    assert (raft / "raft.dump").read_bytes() == b"dump"
    assert not trace.exists()
    assert (copy / JOURNAL).read_bytes() == b"a" * 600 + b"b" * 10
    # Restarted, the node appends but is cut again before its next sync: back to what survived.
    inode = os.stat(raft / JOURNAL).st_ino
    with open(raft / JOURNAL, "ab") as journal:
        journal.write(b"c" * 100)
    cut(raft, copy, trace, synced=True)
    assert (raft / JOURNAL).read_bytes() == b"a" * 600 + b"b" * 10
    assert os.stat(raft / JOURNAL).st_ino == inode


def test_a_cut_of_a_journal_synced_to_its_end_leaves_a_torn_tail(tmp_path):
    raft, copy, trace = tmp_path / "raft", tmp_path / "copy", tmp_path / "n1.synctrace"
    raft.mkdir()
    record(raft, copy)
    journal = _journal(b"a" * 40)
    (raft / JOURNAL).write_bytes(journal)
    _trace(trace, raft / JOURNAL, len(journal))
    cut(raft, copy, trace, synced=True, tear=Tear(30))
    assert (raft / JOURNAL).read_bytes() == journal + torn_record(journal, Tear(30))


def test_an_unsynced_cut_restores_the_directory_as_it_was(tmp_path):
    raft, copy, trace = tmp_path / "raft", tmp_path / "copy", tmp_path / "n1.synctrace"
    raft.mkdir()
    (raft / "raft.dump").write_bytes(b"old dump")
    record(raft, copy)
    (raft / "raft.dump").write_bytes(b"new dump")
    (raft / JOURNAL).write_bytes(b"entries")
    cut(raft, copy, trace, synced=False)
    assert sorted(p.name for p in raft.iterdir()) == ["raft.dump"]
    assert (raft / "raft.dump").read_bytes() == b"old dump"


def test_a_trace_of_the_wrong_size_is_refused(tmp_path):
    (tmp_path / "t").write_bytes(b"\0" * 15)
    with pytest.raises(ValueError):
        read_trace(tmp_path / "t")
    assert read_trace(tmp_path / "absent") is None
