"""The durable Raft journal (scheduler/replication/journal.py) on its own: format, torn tails,
corruption, truncation and compaction, meta, conversion from pysyncobj's journal, disk faults."""

from __future__ import annotations

import errno
import logging
import os
import struct
import subprocess
import sys

import pytest
from pysyncobj.journal import FileJournal

from scheduler.replication.journal import (
    EXIT_JOURNAL_IO,
    HEADER_BYTES,
    JOURNAL_NAME,
    LEGACY_JOURNAL_NAME,
    META_SUFFIX,
    RECORD_HEADER_BYTES,
    DurableJournal,
    JournalCorrupt,
    encode_record,
    record_ends,
    scan,
)


class Stopped(Exception):
    pass


def _raise(message):
    raise Stopped(message)


def entry(i: int, term: int = 1) -> tuple[bytes, int, int]:
    return (b"\x01" + f"command {i} ".encode() * (i % 5 + 1), i, term)


def open_journal(path, **kwargs) -> DurableJournal:
    return DurableJournal(str(path / JOURNAL_NAME), dump_path=str(path / "raft.dump"), on_fatal=_raise, **kwargs)


def written(path, count: int) -> list:
    journal = open_journal(path)
    entries = [entry(i) for i in range(1, count + 1)]
    for e in entries:
        journal.add(*e)
    journal.sync()
    journal._destroy()
    return entries


def test_round_trip(tmp_path):
    entries = written(tmp_path, 20)
    again = open_journal(tmp_path)
    assert [again[i] for i in range(len(again))] == entries
    assert again[-1][1] == 20


def test_add_buffers_and_sync_writes_once(tmp_path):
    calls = []

    def counting_fsync(fd):
        calls.append(fd)
        os.fdatasync(fd)

    journal = open_journal(tmp_path, fsync=counting_fsync)
    calls.clear()
    size = os.path.getsize(tmp_path / JOURNAL_NAME)
    for i in range(1, 101):
        journal.add(*entry(i))
    assert os.path.getsize(tmp_path / JOURNAL_NAME) == size and journal.pending
    assert journal.sync() is True
    assert len(calls) == 1 and journal.syncs == 1
    assert journal.synced_bytes == os.path.getsize(tmp_path / JOURNAL_NAME)
    assert journal.sync() is False  # nothing new: no sync


@pytest.mark.parametrize("cut", [1, 2, 7, RECORD_HEADER_BYTES - 1, RECORD_HEADER_BYTES, RECORD_HEADER_BYTES + 3])
def test_a_torn_tail_is_cut_with_a_warning(tmp_path, caplog, cut):
    entries = written(tmp_path, 10)
    path = tmp_path / JOURNAL_NAME
    size = path.stat().st_size
    os.truncate(path, size - cut)
    with caplog.at_level(logging.WARNING, "raftcron.replication"):
        again = open_journal(tmp_path)
    assert [again[i] for i in range(len(again))] == entries[:-1]
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "torn tail" in warning and str(path) in warning
    assert str(record_ends(str(path))[9]) in warning  # the offset of the cut
    assert path.stat().st_size == record_ends(str(path))[9]  # cut on disk too
    again.add(*entry(10))  # and the log goes on from there
    again.sync()
    assert open_journal(tmp_path)[-1] == entries[-1]


def test_a_last_record_with_a_bad_checksum_is_a_torn_tail(tmp_path, caplog):
    entries = written(tmp_path, 5)
    path = tmp_path / JOURNAL_NAME
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, "raftcron.replication"):
        again = open_journal(tmp_path)
    assert len(again) == 4 and again[-1] == entries[3]
    assert "checksum mismatch in the last record" in caplog.text


def test_a_zero_filled_tail_is_a_torn_tail(tmp_path):
    written(tmp_path, 5)
    path = tmp_path / JOURNAL_NAME
    with open(path, "ab") as stream:
        stream.write(b"\0" * 4096)
    assert len(open_journal(tmp_path)) == 5


def test_a_flipped_byte_in_a_middle_record_is_fatal_and_names_the_offset(tmp_path):
    written(tmp_path, 10)
    path = tmp_path / JOURNAL_NAME
    ends = record_ends(str(path))
    start_of_5 = ends[4]
    data = bytearray(path.read_bytes())
    data[start_of_5 + RECORD_HEADER_BYTES + 2] ^= 0x01  # a payload byte of entry 5
    path.write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt) as caught:
        open_journal(tmp_path)
    assert str(path) in str(caught.value) and f"offset {start_of_5}" in str(caught.value)
    assert path.read_bytes() == bytes(data)  # nothing cut


@pytest.mark.parametrize("field", ["length", "index", "term"])
def test_the_checksum_covers_length_index_and_term(tmp_path, field):
    written(tmp_path, 6)
    path = tmp_path / JOURNAL_NAME
    start_of_3 = record_ends(str(path))[2]
    data = bytearray(path.read_bytes())
    position = start_of_3 + {"length": 4, "index": 8, "term": 16}[field]
    data[position] ^= 0x01  # length 0x..1 -> still a plausible length
    path.write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt, match=f"offset {start_of_3}"):
        open_journal(tmp_path)


def test_an_impossible_length_is_fatal():
    data = bytearray(scan_image([entry(1), entry(2)]))
    struct.pack_into("<I", data, HEADER_BYTES + 4, 0xFFFFFFF0)
    with pytest.raises(JournalCorrupt, match=f"offset {HEADER_BYTES}: impossible record length"):
        scan(bytes(data), "j")


def test_an_index_gap_is_fatal(tmp_path):
    journal = open_journal(tmp_path)
    journal.add(*entry(1))
    journal.add(*entry(3))
    journal.sync()
    with pytest.raises(JournalCorrupt, match="entry 3 follows entry 1"):
        open_journal(tmp_path)


def test_not_a_journal_is_fatal(tmp_path):
    (tmp_path / JOURNAL_NAME).write_bytes(b"garbage" * 10)
    with pytest.raises(JournalCorrupt, match="offset 0"):
        open_journal(tmp_path)


def scan_image(entries) -> bytes:
    from scheduler.replication.journal import encode_header, encode_record

    return encode_header() + b"".join(encode_record(*e) for e in entries)


def test_delete_entries_from_truncates_on_disk(tmp_path):
    journal = open_journal(tmp_path)
    for i in range(1, 11):
        journal.add(*entry(i))
    journal.sync()
    for i in range(11, 14):
        journal.add(*entry(i))  # still buffered
    journal.deleteEntriesFrom(12)  # cuts the buffer only
    journal.deleteEntriesFrom(6)  # cuts the file: entries 7.. go
    journal.add(*entry(7, term=2))
    journal.sync()
    again = open_journal(tmp_path)
    assert [again[i][1:] for i in range(len(again))] == [(i, 1) for i in range(1, 7)] + [(7, 2)]


def test_delete_entries_to_replaces_the_file_after_syncing_the_dump(tmp_path):
    synced = []

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        os.fdatasync(fd)

    (tmp_path / "raft.dump").write_bytes(b"dump")
    journal = open_journal(tmp_path, fsync=fsync)
    for i in range(1, 11):
        journal.add(*entry(i))
    journal.sync()
    inode = (tmp_path / JOURNAL_NAME).stat().st_ino
    synced.clear()
    journal.deleteEntriesTo(4)
    assert synced[:2] == [str(tmp_path / "raft.dump"), str(tmp_path)]  # the dump first, then its rename
    assert str(tmp_path / (JOURNAL_NAME + ".tmp")) in synced  # the new journal before its rename
    assert (tmp_path / JOURNAL_NAME).stat().st_ino != inode  # a new file, never rewritten in place
    journal.add(*entry(11))
    journal.sync()
    again = open_journal(tmp_path)
    assert [again[i][1] for i in range(len(again))] == list(range(5, 12))


def test_clear_syncs_the_dump_before_cutting(tmp_path):
    synced = []
    (tmp_path / "raft.dump").write_bytes(b"dump")
    journal = open_journal(tmp_path, fsync=lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")))
    journal.add(*entry(1))
    journal.sync()
    synced.clear()
    journal.clear()
    assert synced[0] == str(tmp_path / "raft.dump")
    journal.add(*entry(40, term=3))
    journal.add(*entry(41, term=3))
    journal.sync()
    again = open_journal(tmp_path)
    assert [again[i][1] for i in range(len(again))] == [40, 41]


def test_meta_is_durable_and_checksummed(tmp_path):
    synced = []
    journal = open_journal(tmp_path, fsync=lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")))
    synced.clear()
    journal.setCurrentTerm(7, "127.0.0.1:7101")
    meta = tmp_path / (JOURNAL_NAME + META_SUFFIX)
    # the file itself, then the directory holding its new name: before setCurrentTerm returns
    assert synced == [str(meta) + ".tmp", str(tmp_path)]
    journal.setRaftCommitIndex(1)
    again = open_journal(tmp_path)
    assert (again.getCurrentTerm(), again.getVotedForNodeId()) == (7, "127.0.0.1:7101")
    data = bytearray(meta.read_bytes())
    data[-2] ^= 0x01
    meta.write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt, match="meta checksum"):
        open_journal(tmp_path)


def test_commit_index_is_saved_once_a_second_and_clamped_to_the_log(tmp_path):
    journal = open_journal(tmp_path)
    for i in range(1, 6):
        journal.add(*entry(i))
    journal.sync()
    journal.setRaftCommitIndex(9)  # say the tail was lost since
    journal.onOneSecondTimer()
    assert open_journal(tmp_path).getRaftCommitIndex() == 5


def test_converts_pysyncobj_journal_once(tmp_path):
    legacy = FileJournal(str(tmp_path / LEGACY_JOURNAL_NAME))
    entries = [entry(i, term=2) for i in range(1, 30)]
    for e in entries:
        legacy.add(*e)
    legacy.setCurrentTerm(3, "127.0.0.1:7102")
    legacy.setRaftCommitIndex(25)
    legacy.onOneSecondTimer()
    legacy._destroy()
    journal = open_journal(tmp_path)
    assert [journal[i] for i in range(len(journal))] == entries
    assert (journal.getCurrentTerm(), journal.getVotedForNodeId(), journal.getRaftCommitIndex()) == (
        3,
        "127.0.0.1:7102",
        25,
    )
    assert not (tmp_path / LEGACY_JOURNAL_NAME).exists()
    assert not (tmp_path / (LEGACY_JOURNAL_NAME + ".meta")).exists()
    journal.add(*entry(30, term=3))
    journal.sync()
    assert open_journal(tmp_path)[-1] == entry(30, term=3)


@pytest.mark.parametrize("error", [errno.EIO, errno.ENOSPC])
def test_a_failed_fsync_is_fatal_and_never_retried(tmp_path, error):
    calls = []

    def failing(fd):
        calls.append(fd)
        raise OSError(error, os.strerror(error))

    journal = open_journal(tmp_path)
    journal._fsync = failing
    journal.add(*entry(1))
    with pytest.raises(Stopped, match=f"{os.strerror(error)}.*must not acknowledge") as caught:
        journal.sync()
    assert str(tmp_path / JOURNAL_NAME) in str(caught.value)
    assert len(calls) == 1 and journal.synced_bytes == HEADER_BYTES


def test_a_failed_write_is_fatal(tmp_path):
    def short_then_full(fd, data, offset):
        if len(data) > 10:
            return os.pwrite(fd, bytes(data[:10]), offset)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    journal = open_journal(tmp_path)
    journal._pwrite = short_then_full
    journal.add(*entry(1))
    with pytest.raises(Stopped, match="No space left on device"):
        journal.sync()


def test_a_failed_meta_sync_is_fatal(tmp_path):
    journal = open_journal(tmp_path)

    def failing(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    journal._fsync = failing
    with pytest.raises(Stopped, match="meta write failed"):
        journal.setCurrentTerm(2, None)


def test_sync_off_writes_but_never_syncs(tmp_path):
    calls = []
    trace = tmp_path / "trace"
    journal = open_journal(tmp_path, sync=False, fsync=calls.append, trace_path=str(trace))
    journal.add(*entry(1))
    journal.sync()
    journal.setCurrentTerm(2, None)
    assert calls == [] and not trace.exists()
    assert open_journal(tmp_path)[-1] == entry(1)  # written: survives a killed process


def test_the_sync_trace_names_the_file_and_its_durable_length(tmp_path):
    trace = tmp_path / "trace"
    journal = open_journal(tmp_path, trace_path=str(trace))
    path = tmp_path / JOURNAL_NAME

    def traced():
        return struct.unpack("<QQ", trace.read_bytes())

    assert traced() == (path.stat().st_ino, HEADER_BYTES)
    for i in range(1, 6):
        journal.add(*entry(i))
    assert traced()[1] == HEADER_BYTES  # added is not synced
    journal.sync()
    assert traced() == (path.stat().st_ino, path.stat().st_size)
    journal.deleteEntriesFrom(2)
    assert traced()[1] == record_ends(str(path))[2] == path.stat().st_size
    journal.deleteEntriesTo(1)
    assert traced() == (path.stat().st_ino, path.stat().st_size)
    assert len(trace.read_bytes()) == 16


def test_a_power_cut_at_the_traced_length_restarts(tmp_path):
    """What the power-loss simulation does: SIGKILL, cut the file to the traced length, restart."""
    trace = tmp_path / "trace"
    journal = open_journal(tmp_path, trace_path=str(trace))
    for i in range(1, 8):
        journal.add(*entry(i))
    journal.sync()
    for i in range(8, 10):
        journal.add(*entry(i))
    journal._pwrite(journal._fd, bytes(journal._pending[:30]), journal._written)  # half a write reached the cache
    _inode, length = struct.unpack("<QQ", trace.read_bytes())
    os.truncate(tmp_path / JOURNAL_NAME, length)
    again = open_journal(tmp_path)
    assert [again[i][1] for i in range(len(again))] == list(range(1, 8))


def test_durable_index_counts_only_synced_records(tmp_path):
    journal = open_journal(tmp_path)
    assert journal.durable_index() == 0
    for i in range(1, 4):
        journal.add(*entry(i))
    assert journal.durable_index() == 0
    journal.sync()
    journal.add(*entry(4))
    assert journal.durable_index() == 3
    journal.deleteEntriesFrom(1)
    assert journal.durable_index() == 1
    assert open_journal(tmp_path, sync=False).durable_index() == 0


def test_the_default_fatal_path_exits_with_the_io_status(tmp_path):
    """A journal whose fsync fails, in a process of its own, with the default on_fatal."""
    script = (
        "import errno, os\n"
        "from scheduler.replication.journal import DurableJournal\n"
        f"journal = DurableJournal({str(tmp_path / JOURNAL_NAME)!r})\n"
        "def failing(fd): raise OSError(errno.EIO, os.strerror(errno.EIO))\n"
        "journal._fsync = failing\n"
        "journal.add(b'\\x01x', 1, 1)\n"
        "journal.sync()\n"
        "print('carried on')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == EXIT_JOURNAL_IO
    assert "Input/output error" in done.stderr and "this node stops" in done.stderr
    assert "carried on" not in done.stdout


@pytest.mark.parametrize("kept_bytes", [2, 9, 30, 50])
def test_a_torn_batch_whose_rest_reads_as_zeros_is_a_torn_tail(tmp_path, caplog, kept_bytes):
    # A batch of two records written in one piece after entry 5 and never synced: a power cut
    # kept its first bytes and the file's new size, the rest reads as zeros.
    written(tmp_path, 5)
    path = tmp_path / JOURNAL_NAME
    batch = encode_record(b"x" * 40, 6, 1) + encode_record(b"y" * 40, 7, 1)
    with open(path, "ab") as stream:
        stream.write(batch[:kept_bytes] + b"\0" * (len(batch) - kept_bytes))
    with caplog.at_level(logging.WARNING, "raftcron.replication"):
        again = open_journal(tmp_path)
    assert len(again) == 5 and again[-1][1] == 5
    assert "torn tail" in caplog.text


def test_damage_that_intact_records_follow_stays_fatal_even_with_zeros_after_them(tmp_path):
    written(tmp_path, 8)
    path = tmp_path / JOURNAL_NAME
    start_of_4 = record_ends(str(path))[3]
    data = bytearray(path.read_bytes())
    data[start_of_4 : start_of_4 + 6] = b"\0\0\0\0\0\0"  # entry 4's checksum and length wiped
    path.write_bytes(bytes(data) + b"\0" * 512)
    with pytest.raises(JournalCorrupt, match=f"offset {start_of_4}"):
        open_journal(tmp_path)
