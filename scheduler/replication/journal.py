"""A synced, checksummed Raft journal behind pysyncobj's `Journal` interface.

pysyncobj's own journal writes through mmap and never syncs, its records carry no checksum and
its term/vote file is renamed without an fsync: a power loss of a majority could lose entries a
leader had counted as committed, and a torn record was read back as garbage (a node restarted
with a record cut by 7 bytes raised `EOFError` on every tick and never caught up).

Here entries are kept in memory, as pysyncobj keeps them, and `add` only buffers. `sync()` writes
the buffer with one pwrite and makes it durable with one fdatasync: the adapter calls it once per
Raft tick, before any answer that acknowledges those entries goes out (group commit). Every
record carries a CRC32 of its length, index, term and payload. On open, a torn tail (a partial
record, or a last record whose checksum fails) is cut off with a warning; a bad record before the
last one is corruption, and the node refuses to start, naming the file and the offset.

File `raft.wal`: a 16-byte header (magic, format version, CRC32 of both), then records
`<crc32 u32><length u32><index u64><term u64><payload>`, the CRC32 covering everything after
it. Term, vote and commit index live in `raft.wal.meta` (magic, CRC32, JSON), replaced by
write-fsync-rename-fsync(dir), synchronously whenever the term or vote changes: Raft needs them
durable before any message reflecting them.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import struct
import time
import zlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from scheduler.replication.pysyncobj_compat import FileJournal, Journal, to_bytes

log = logging.getLogger("raftcron.replication")

JOURNAL_NAME = "raft.wal"
META_SUFFIX = ".meta"
LEGACY_JOURNAL_NAME = "raft.journal"  # pysyncobj's FileJournal, converted once on first start

MAGIC = b"RCRNWAL\n"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sI")
HEADER_BYTES = _HEADER.size + 4  # magic, version, crc32 of both
_RECORD = struct.Struct("<IIQQ")  # crc32 of the rest, payload length, index, term
RECORD_HEADER_BYTES = _RECORD.size
_CRC_INPUT = struct.Struct("<IQQ")  # what the crc covers before the payload
# pysyncobj's payloads start with a command-type byte; entries are capped at 1 MiB (raftlog.py).
# A length outside these bounds cannot have been written by us: corruption, not a torn write.
MIN_PAYLOAD_BYTES = 1
MAX_PAYLOAD_BYTES = 64 << 20

META_MAGIC = b"RCRNMETA"

# Exit statuses of a node stopped by its journal (sysexits.h): the supervisor can tell them apart.
EXIT_JOURNAL_CORRUPT = 65  # EX_DATAERR: the node refused to start
EXIT_JOURNAL_IO = 74  # EX_IOERR: a write or sync failed while running

# Sync durations (seconds) for the node's histogram: page-cache syncs take microseconds, a
# disk's milliseconds; a sync of a second or more means the disk is failing or saturated.
SYNC_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

TRACE_ENV = "RAFTCRON_SYNC_TRACE"
_TRACE = struct.Struct("<QQ")  # inode of the journal file, bytes of it known durable


class JournalCorrupt(Exception):
    """The journal cannot be trusted: the node must not start on it."""


def stop_node(message: str, exit_code: int = EXIT_JOURNAL_IO) -> NoReturn:
    """Log and leave at once, from whichever thread: an exception on pysyncobj's tick thread
    would be logged and retried every tick, and a node that carries on after a failed fsync may
    acknowledge what is not on disk (the kernel may already have dropped the dirty pages)."""
    log.critical(message)
    for handler in logging.getLogger().handlers:
        try:
            handler.flush()
        except Exception:  # noqa: S110 (leaving anyway)
            pass
    os._exit(exit_code)


def encode_record(payload: bytes, index: int, term: int) -> bytes:
    body = _CRC_INPUT.pack(len(payload), index, term) + payload
    return struct.pack("<I", zlib.crc32(body)) + body


def encode_header() -> bytes:
    head = _HEADER.pack(MAGIC, FORMAT_VERSION)
    return head + struct.pack("<I", zlib.crc32(head))


@dataclass(frozen=True)
class Scan:
    entries: list[tuple[bytes, int, int]]
    offsets: array  # file offset of each entry's record
    valid_bytes: int  # everything after this is a torn tail
    torn: str  # why the tail was cut, "" when there was none


# How far past a damaged record's entry index scan() looks for a later, intact record.
FOLLOWING_INDEX_WINDOW = 256


def _intact_record_follows(view: memoryview, start: int, first_index: int | None) -> bool:
    """Whether an intact record of entry first_index..first_index+FOLLOWING_INDEX_WINDOW starts
    anywhere past `start`. Damage that intact records follow is not a torn append (an append is
    written in one piece, after everything before it): it is corruption of what was on disk.
    Without an index to look for (damage in the first record), assume intact records follow."""
    if first_index is None:
        return True
    data = view.obj if isinstance(view.obj, bytes) else bytes(view)
    for index in range(first_index, first_index + FOLLOWING_INDEX_WINDOW):
        needle = struct.pack("<Q", index)
        found = data.find(needle, start + 8)
        while found != -1:
            offset = found - 8  # the index sits 8 bytes into a record's header
            if offset + RECORD_HEADER_BYTES <= len(data):
                _crc, length, _index, _term = _RECORD.unpack_from(data, offset)
                record_end = offset + RECORD_HEADER_BYTES + length
                if (
                    MIN_PAYLOAD_BYTES <= length <= MAX_PAYLOAD_BYTES
                    and record_end <= len(data)
                    and _crc == zlib.crc32(data[offset + 4 : record_end])
                ):
                    return True
            found = data.find(needle, found + 1)
    return False


def scan(data: bytes | memoryview, name: str) -> Scan:
    """Read and verify every record of a journal image. Raises JournalCorrupt for damage that a
    torn append cannot explain: bad header, bad length, bad checksum before the last record,
    index gap. Pure, so tests call it on crafted bytes."""
    view = memoryview(data)
    if len(view) < HEADER_BYTES or bytes(view[:8]) != MAGIC:
        raise JournalCorrupt(f"{name}: offset 0: not a raftcron journal (bad magic)")
    magic, version = _HEADER.unpack_from(view, 0)
    if struct.unpack_from("<I", view, _HEADER.size)[0] != zlib.crc32(view[: _HEADER.size]):
        raise JournalCorrupt(f"{name}: offset 0: header checksum mismatch")
    if version != FORMAT_VERSION:
        raise JournalCorrupt(f"{name}: offset 0: journal format {version}, this version reads {FORMAT_VERSION}")
    entries: list[tuple[bytes, int, int]] = []
    offsets = array("q")
    offset, end = HEADER_BYTES, len(view)
    while offset < end:
        rest = end - offset
        if rest < RECORD_HEADER_BYTES:
            return Scan(entries, offsets, offset, f"partial record header ({rest} bytes)")
        crc, length, index, term = _RECORD.unpack_from(view, offset)
        # The entry this record should hold: a later intact record of it, or of one after it,
        # tells corruption (fatal) from a torn append (cut).
        expected = entries[-1][1] + 1 if entries else None
        if not MIN_PAYLOAD_BYTES <= length <= MAX_PAYLOAD_BYTES:
            if not any(view[offset:]):
                # A file extended but never written (a crash after the size reached the disk
                # and before the data did) reads as zeros: nothing was acknowledged from there.
                return Scan(entries, offsets, offset, f"{rest} zero bytes")
            if not _intact_record_follows(view, offset, expected):
                # Part of an unsynced batch reached the disk and the rest reads as zeros or
                # garbage: nothing from here on was acknowledged by this node.
                return Scan(entries, offsets, offset, f"impossible record length {length}, no intact record after it")
            raise JournalCorrupt(f"{name}: offset {offset}: impossible record length {length}")
        record_end = offset + RECORD_HEADER_BYTES + length
        if record_end > end:
            return Scan(entries, offsets, offset, f"partial record ({rest} of {record_end - offset} bytes)")
        if crc != zlib.crc32(view[offset + 4 : record_end]):
            if record_end == end:
                return Scan(entries, offsets, offset, "checksum mismatch in the last record")
            if not _intact_record_follows(view, offset, expected):
                return Scan(
                    entries, offsets, offset, f"checksum mismatch in record of entry {index}, no intact record after it"
                )
            raise JournalCorrupt(
                f"{name}: offset {offset}: checksum mismatch in record of entry {index} "
                f"({end - record_end} bytes of records follow it)"
            )
        if entries and index != entries[-1][1] + 1:
            raise JournalCorrupt(f"{name}: offset {offset}: entry {index} follows entry {entries[-1][1]}")
        entries.append((bytes(view[offset + RECORD_HEADER_BYTES : record_end]), index, term))
        offsets.append(offset)
        offset = record_end
    return Scan(entries, offsets, offset, "")


def read_entries(path: str) -> list[tuple[bytes, int, int]]:
    """Every verified entry of a journal file, without touching it (for offline tools)."""
    with open(path, "rb") as stream:
        return scan(stream.read(), path).entries


def record_ends(path: str) -> dict[int, int]:
    """Entry index -> the file offset just past its record (what a synced length must reach)."""
    with open(path, "rb") as stream:
        found = scan(stream.read(), path)
    return {
        entry[1]: offset + RECORD_HEADER_BYTES + len(entry[0]) for entry, offset in zip(found.entries, found.offsets)
    }


def encode_meta(meta: dict) -> bytes:
    body = json.dumps(meta, sort_keys=True).encode()
    return META_MAGIC + struct.pack("<I", zlib.crc32(body)) + body


def decode_meta(data: bytes, name: str) -> dict:
    if data[:8] != META_MAGIC or len(data) < 12:
        raise JournalCorrupt(f"{name}: offset 0: not a raftcron journal meta file")
    body = data[12:]
    if struct.unpack_from("<I", data, 8)[0] != zlib.crc32(body):
        raise JournalCorrupt(f"{name}: offset 8: meta checksum mismatch (term and vote cannot be trusted)")
    return json.loads(body)


class DurableJournal(Journal):
    """pysyncobj's Journal, synced and checksummed. Every method runs on the Raft tick thread
    (the constructor on the thread building the SyncObj). An OSError while writing or syncing
    goes to `on_fatal`, which must not return (default: log CRITICAL and exit the process)."""

    def __init__(
        self,
        path: str,
        *,
        dump_path: str | None = None,
        sync: bool = True,
        fsync: Callable[[int], None] = os.fdatasync,
        pwrite: Callable[[int, bytes, int], int] = os.pwrite,
        trace_path: str | None = None,
        on_fatal: Callable[[str], NoReturn] = stop_node,
    ) -> None:
        self._path = path
        self._meta_path = path + META_SUFFIX
        self._dir = os.path.dirname(os.path.abspath(path))
        self._dump_path = dump_path
        self._sync_on = sync
        self._fsync = fsync
        self._pwrite = pwrite
        self._on_fatal = on_fatal
        self._pending = bytearray()  # records added since the last sync, not yet written
        self._written = 0  # bytes of the file that hold records we wrote (its length)
        self._synced = 0  # bytes of the file known durable
        self._truncated = False  # an ftruncate awaits the next sync
        self.syncs = 0
        self.sync_seconds_total = 0.0
        self.sync_counts = [0] * (len(SYNC_BUCKETS_S) + 1)  # per bucket of SYNC_BUCKETS_S, then +Inf
        self._trace_fd = -1
        if trace_path and sync:
            self._trace_fd = os.open(trace_path, os.O_WRONLY | os.O_CREAT, 0o600)
        legacy = os.path.join(self._dir, LEGACY_JOURNAL_NAME)
        if not os.path.exists(path):
            if os.path.exists(legacy):
                self._convert(legacy)
            else:
                self._replace_file([])
                self._write_meta({})
        self._meta = self._read_meta()
        self._fd = os.open(path, os.O_RDWR)
        self._inode = os.fstat(self._fd).st_ino
        self._load()

    # -- pysyncobj's Journal interface -----------------------------------
    def add(self, command, idx, term):
        self._entries.append((command, idx, term))
        self._offsets.append(self._end)
        record = encode_record(to_bytes(command), idx, term)
        self._pending += record
        self._end += len(record)

    def clear(self):
        # Called when a snapshot replaces the log (installed from the leader, or loaded at start):
        # the dump must be on disk before the entries it replaces are cut.
        self._make_dump_durable()
        self.deleteEntriesFrom(0)

    def deleteEntriesFrom(self, entryFrom):  # noqa: N802, N803 (pysyncobj's names)
        if entryFrom >= len(self._entries):
            return
        cut = self._offsets[entryFrom]
        del self._entries[entryFrom:]
        del self._offsets[entryFrom:]
        self._end = cut
        if cut >= self._written:
            del self._pending[cut - self._written :]
            return
        self._pending.clear()
        try:
            os.ftruncate(self._fd, cut)
        except OSError as exc:
            self._fail("truncate", exc)
        self._written = cut
        self._truncated = True
        # Whether an unsynced truncation survives a power loss is up to the disk; the first
        # `cut` bytes are durable either way.
        if cut < self._synced:
            self._synced = cut
            self._write_trace()

    def deleteEntriesTo(self, entryTo):  # noqa: N802, N803
        # After a compaction: the entries before entryTo are in the dump. Never rewrite in place
        # (a crash half way would lose entries that are in no dump): a new file replaces the old.
        self._make_dump_durable()
        self._entries = self._entries[entryTo:]
        self._replace_file(self._entries)
        self._reopen()

    def __getitem__(self, item):
        return self._entries[item]

    def __len__(self):
        return len(self._entries)

    def _destroy(self):
        if self._fd < 0:
            return
        self.sync()
        os.close(self._fd)
        self._fd = -1
        if self._trace_fd >= 0:
            os.close(self._trace_fd)
            self._trace_fd = -1

    def flush(self):
        self.sync()

    def setRaftCommitIndex(self, raftCommitIndex):  # noqa: N802, N803
        # Volatile in Raft; pysyncobj sets it on every append and saves it once a second.
        self._commit_index = raftCommitIndex

    def getRaftCommitIndex(self):  # noqa: N802
        return self._commit_index

    def setCurrentTerm(self, term, votedForNodeId):  # noqa: N802, N803
        # Raft: durable before the vote request or grant that reflects it is sent.
        self._meta = {**self._meta, "term": term, "voted_for": votedForNodeId}
        self._save_meta()

    def getCurrentTerm(self):  # noqa: N802
        return self._meta.get("term", 0)

    def getVotedForNodeId(self):  # noqa: N802
        return self._meta.get("voted_for")

    def onOneSecondTimer(self):  # noqa: N802
        if self._commit_index != self._meta.get("commit_index"):
            self._save_meta()

    # -- durability --------------------------------------------------------
    def sync(self) -> bool:
        """Write what was added since the last sync and make it durable: one pwrite, one
        fdatasync. False when there was nothing to do. With sync off, only the write happens
        (the entries survive a killed process, not a power loss)."""
        if not self._pending and not self._truncated:
            return False
        started = time.perf_counter()
        data, self._pending = self._pending, bytearray()
        offset, view = self._written, memoryview(data)
        try:
            while view:
                done = self._pwrite(self._fd, view, offset)
                offset += done
                view = view[done:]
            self._written = offset
            if self._sync_on:
                self._fsync(self._fd)
        except OSError as exc:
            self._fail("sync", exc)
        self._truncated = False
        if self._sync_on:
            self._synced = self._written
            elapsed_s = time.perf_counter() - started
            self.syncs += 1
            self.sync_seconds_total += elapsed_s
            self.sync_counts[bisect.bisect_left(SYNC_BUCKETS_S, elapsed_s)] += 1
            self._write_trace()
        return True

    @property
    def synced_bytes(self) -> int:
        return self._synced

    def durable_index(self) -> int:
        """The highest entry index whose record is synced (0: none). `_synced` always falls on a
        record boundary, so every record starting before it is whole on disk."""
        count = bisect.bisect_left(self._offsets, self._synced)
        return self._entries[count - 1][1] if count else 0

    @property
    def pending(self) -> bool:
        return bool(self._pending) or self._truncated

    def _fail(self, what: str, exc: OSError, path: str | None = None) -> NoReturn:
        self._on_fatal(
            f"raft journal {what} failed on {exc.filename or path or self._path}: {exc.strerror or exc} "
            f"(errno {exc.errno}); this node stops: it must not acknowledge what is not on disk"
        )
        raise AssertionError("on_fatal returned")  # pragma: no cover

    def _sync_dir(self) -> None:
        if not self._sync_on:
            return
        fd = os.open(self._dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self._fsync(fd)
        finally:
            os.close(fd)

    def _make_dump_durable(self) -> None:
        """pysyncobj's compaction child and its snapshot install write the dump to a temporary
        file and rename it without syncing either."""
        if not self._sync_on or not self._dump_path or not os.path.exists(self._dump_path):
            return
        try:
            fd = os.open(self._dump_path, os.O_RDONLY)
            try:
                self._fsync(fd)
            finally:
                os.close(fd)
            self._sync_dir()
        except OSError as exc:
            self._fail("dump sync", exc, self._dump_path)

    def _replace_file(self, entries) -> None:
        """Write a complete journal next to the old one, sync it, rename it over, sync the dir."""
        tmp = self._path + ".tmp"
        body = bytearray(encode_header())
        offsets = array("q")
        for command, idx, term in entries:
            offsets.append(len(body))
            body += encode_record(to_bytes(command), idx, term)
        self._replace_durably(tmp, self._path, body, "rewrite", named=tmp)
        self._offsets, self._end = offsets, len(body)

    def _replace_durably(self, tmp: str, path: str, data: bytes | bytearray, what: str, named: str) -> None:
        """Write `data` to `tmp`, sync it, rename it over `path` and sync the directory: a crash
        leaves the old file or the new one, whole. A failure is fatal (see _fail)."""
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[self._pwrite(fd, view, len(data) - len(view)) :]
                if self._sync_on:
                    self._fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            self._sync_dir()
        except OSError as exc:
            self._fail(what, exc, named)

    def _reopen(self) -> None:
        os.close(self._fd)
        self._fd = os.open(self._path, os.O_RDWR)
        self._inode = os.fstat(self._fd).st_ino
        self._pending.clear()
        self._truncated = False
        self._written = self._end
        if self._sync_on:
            self._synced = self._end
            self._write_trace()

    def _write_trace(self) -> None:
        # Test hook for simulated power loss: which prefix of which file is durable. In place,
        # no fsync: the page cache survives the SIGKILL the simulation uses.
        if self._trace_fd >= 0:
            try:
                os.pwrite(self._trace_fd, _TRACE.pack(self._inode, self._synced), 0)
            except OSError:
                log.warning("cannot write the sync trace", exc_info=True)

    # -- opening -------------------------------------------------------------
    def _load(self) -> None:
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size, 0) if size else b""
        found = scan(data, self._path)
        self._entries, self._offsets = found.entries, found.offsets
        self._end = self._written = found.valid_bytes
        if found.torn:
            log.warning(
                "raft journal %s: torn tail at offset %d (%s): dropped %d bytes; the leader sends those entries again",
                self._path,
                found.valid_bytes,
                found.torn,
                size - found.valid_bytes,
            )
            try:
                os.ftruncate(self._fd, found.valid_bytes)
            except OSError as exc:
                self._fail("truncate", exc)
        # What a killed process left in the page cache is made durable before anything is
        # answered from it.
        try:
            if self._sync_on:
                self._fsync(self._fd)
        except OSError as exc:
            self._fail("sync", exc)
        self._synced = self._written if self._sync_on else 0
        self._write_trace()
        last = self._entries[-1][1] if self._entries else 0
        # The saved commit index may cover entries that never reached the disk.
        self._commit_index = min(self._meta.get("commit_index", 1), max(last, 1))

    def _convert(self, legacy: str) -> None:
        """A data dir of pysyncobj's journal: read it once, write ours synced, then drop it."""
        try:
            old = FileJournal(legacy)
        except Exception as exc:
            raise JournalCorrupt(f"{legacy}: cannot read pysyncobj's journal to convert it: {exc!r}") from exc
        try:
            entries = [old[i] for i in range(len(old))]
            meta = {
                "term": old.getCurrentTerm(),
                "voted_for": old.getVotedForNodeId(),
                "commit_index": old.getRaftCommitIndex(),
            }
        finally:
            old._destroy()
        for entry in entries:
            if not isinstance(entry[0], bytes | bytearray) or len(entry[0]) < MIN_PAYLOAD_BYTES:
                raise JournalCorrupt(f"{legacy}: entry {entry[1]} is not a pysyncobj command")
        self._meta = meta
        self._write_meta(meta)
        self._replace_file(entries)  # its rename marks the conversion done
        for name in (legacy, legacy + ".meta"):
            try:
                os.unlink(name)
            except FileNotFoundError:
                pass
        self._sync_dir()
        log.info(
            "converted pysyncobj's journal %s (%d entries, term %d) to %s",
            legacy,
            len(entries),
            meta["term"],
            self._path,
        )

    # -- meta ------------------------------------------------------------------
    def _read_meta(self) -> dict:
        try:
            with open(self._meta_path, "rb") as stream:
                return decode_meta(stream.read(), self._meta_path)
        except FileNotFoundError:
            return {}

    def _save_meta(self) -> None:
        self._meta["commit_index"] = self._commit_index
        self._write_meta(self._meta)

    def _write_meta(self, meta: dict) -> None:
        self._replace_durably(
            self._meta_path + ".tmp", self._meta_path, encode_meta(meta), "meta write", named=self._meta_path
        )
