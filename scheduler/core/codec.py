"""The only definition of the log and snapshot formats.

Command: one version byte, then a msgpack-encoded tagged command; a command whose encoding is
larger than COMPRESS_ABOVE_BYTES is stored zlib-compressed under its own version byte (map keys
repeat in every job of a large apply, so it shrinks about tenfold and a 1 MiB entry holds far
more jobs; a claim batch repeats its instants). A node that predates the compressed format cannot read such entries: upgrade every
node before applying large job files.
Snapshot: a magic, one version byte, then the msgpack-encoded State (formats 1 and 2 are still
read). Format 3 is format 2 plus the cluster version; it is written only once the cluster version
is above 1, so until every voter reads it a snapshot (and a digest) is format 2 byte for byte.
Format 4 is format 3 plus the calendars, written once the cluster version is 3.
What a version byte may hold is the log format (log_format.py): a node capped below the newest
format refuses commands and snapshots newer than its cap with NewerLogFormat.
Encoding is deterministic (sorted map keys), so equal states give equal bytes,
and the digest of those bytes is how replicas prove they agree.
Golden files under tests/unit/core/golden keep old logs readable.
"""

from __future__ import annotations

import hashlib
import zlib
from operator import itemgetter
from typing import Any

import msgspec

from scheduler.core.commands import Command, SetClusterVersion
from scheduler.core.log_format import BASE_LOG_FORMAT, LOG_FORMAT, SNAPSHOT_LOG_FORMATS, required_log_format
from scheduler.core.model import Job, JobSpec, Run
from scheduler.core.results import Result
from scheduler.core.sharing import share_decoded_job, share_run
from scheduler.core.state import State

COMMAND_FORMAT_VERSION = 1
COMPRESSED_COMMAND_FORMAT_VERSION = 2
# A herd's claim batch (1,000 claims, 45-65 KiB) is compressed: every node journals, sends or
# receives each entry, 2.5-12 times smaller, for about 0.1 ms of zlib at the leader
# (docs/design/claim-entries-compressed.md).
COMPRESS_ABOVE_BYTES = 16 * 1024
# A compressed entry never expands past this (a corrupt or hostile one is refused, not inflated).
MAX_DECOMPRESSED_BYTES = 64 << 20
SNAPSHOT_MAGIC = b"RCS"
SNAPSHOT_FORMAT_VERSION = 2
# Format 1 held each job's full spec and every fact as a field of its own; format 2 holds its body
# (the spec with an empty id), the id beside it and the facts grouped (see model.Job). Both decode
# to the same state. Format 3 adds State.cluster_version (written only when it is above 1).
VERSIONED_SNAPSHOT_FORMAT_VERSION = 3
# Format 4 adds State.calendars (log format 3); written once the cluster version is 3.
CALENDARS_SNAPSHOT_FORMAT_VERSION = 4
READABLE_SNAPSHOT_FORMAT_VERSIONS = (1, 2, 3, 4)


class CodecError(ValueError):
    """Bytes that are not a command or snapshot this version understands."""


class NewerLogFormat(CodecError):
    """Bytes written by a newer version (an unknown version byte, command type or field, or a
    command or snapshot above this node's log format): this node is older than the log."""


_encoder = msgspec.msgpack.Encoder(order="deterministic")
_command_decoder = msgspec.msgpack.Decoder(Command)
_result_decoder = msgspec.msgpack.Decoder(Result)


def encode_command(command: Command) -> bytes:
    body = _encoder.encode(command)
    if len(body) > MAX_DECOMPRESSED_BYTES:
        # Every node refuses to inflate it: never let such an entry reach the log.
        raise CodecError(f"{type(command).__name__} encodes to {len(body)} bytes, more than {MAX_DECOMPRESSED_BYTES}")
    if len(body) > COMPRESS_ABOVE_BYTES:
        return bytes((COMPRESSED_COMMAND_FORMAT_VERSION,)) + zlib.compress(body, 1)
    return bytes((COMMAND_FORMAT_VERSION,)) + body


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        body = inflater.decompress(data, MAX_DECOMPRESSED_BYTES)
    except zlib.error as exc:
        raise CodecError(f"undecodable compressed command: {exc}") from None
    if inflater.unconsumed_tail or not inflater.eof:
        raise CodecError(f"compressed command is truncated or inflates past {MAX_DECOMPRESSED_BYTES} bytes")
    return body


def decode_command(data: bytes, max_log_format: int = LOG_FORMAT) -> Command:
    """The command in `data`; NewerLogFormat when it needs a format above `max_log_format` (or one
    this code does not know), CodecError when the bytes are damaged."""
    if not data:
        raise CodecError("empty command")
    if data[0] == COMPRESSED_COMMAND_FORMAT_VERSION:
        body = _inflate(data[1:])
    elif data[0] == COMMAND_FORMAT_VERSION:
        body = data[1:]
    else:
        raise NewerLogFormat(f"unknown command format version {data[0]}")
    try:
        command = _command_decoder.decode(body)
    except msgspec.ValidationError as exc:
        if _names_something_unknown(exc):
            raise NewerLogFormat(f"unknown command type or field: {exc}") from None
        raise CodecError(f"undecodable command: {exc}") from None
    except msgspec.DecodeError as exc:
        raise CodecError(f"undecodable command: {exc}") from None
    # Walking every field of a large entry cost 13 % of a follower's apply (a million jobs): only
    # a node capped below this code's format can find a field it must refuse; this code knows all.
    # A cluster version is a value, not a field: a newer leader's is refused whatever the cap.
    if max_log_format >= LOG_FORMAT and not isinstance(command, SetClusterVersion):
        return command
    needed = required_log_format(command)
    if needed > max_log_format:
        raise NewerLogFormat(
            f"{type(command).__name__} needs log format {needed}, this node reads up to {max_log_format}"
        )
    return command


def _names_something_unknown(exc: msgspec.ValidationError) -> bool:
    """msgspec's words for a tag no command has, and a field the struct does not have."""
    text = str(exc)
    return text.startswith("Object contains unknown field") or (text.startswith("Invalid value") and "$.type`" in text)


def snapshot_format_of(state: State) -> int:
    """The snapshot format a state is written in: the oldest that holds everything it has."""
    if state.cluster_version >= 3 or state.calendars:
        return CALENDARS_SNAPSHOT_FORMAT_VERSION
    if state.cluster_version == BASE_LOG_FORMAT:
        return SNAPSHOT_FORMAT_VERSION
    return VERSIONED_SNAPSHOT_FORMAT_VERSION


def encode_snapshot(state: State) -> bytes:
    version = snapshot_format_of(state)
    return SNAPSHOT_MAGIC + bytes((version,)) + _encoder.encode(_presorted(state, _STATE_FRAMES[version]))


def _presorted(state: State, frame: type[msgspec.Struct]) -> msgspec.Struct:
    """A shallow copy of `state` whose dicts are already in key order.

    msgspec's deterministic encoding sorts every dict, and its sort is quadratic on keys that are
    in order except for a smaller one at the end: 100,000 jobs added in id order, then one whose
    id sorts first, took 7 s to encode instead of 0.005 s (16-60 s in a busy node, which made
    every compaction and digest of such a state crawl). Python's sort is linear on that input,
    and msgspec's pass over keys already in order is linear too. The bytes are unchanged:
    msgspec still sorts, it just finds nothing to move.
    """
    values = {}
    for name in frame.__struct_fields__:
        value = getattr(state, name)
        if isinstance(value, dict) and len(value) > 1:
            value = dict(sorted(value.items(), key=itemgetter(0)))
        values[name] = value
    return frame(**values)


# State fields each snapshot format leaves out: format 2 holds neither the cluster version nor
# the calendars, format 3 no calendars, so a state that has nothing newer encodes to the bytes
# (and the digest) an older node writes for it.
# The derived fields (`_DERIVED`) are in no format: they are rebuilt from the rest.
_DERIVED = frozenset({"dependents", "settling", "alert_prune_from"})
_LEFT_OUT: dict[int, frozenset[str]] = {
    1: frozenset({"cluster_version", "calendars"}) | _DERIVED,
    2: frozenset({"cluster_version", "calendars"}) | _DERIVED,
    3: frozenset({"calendars"}) | _DERIVED,
    4: _DERIVED,
}


def _state_frame(version: int) -> type[msgspec.Struct]:
    """State as snapshot format `version` holds it: the fields it has, in the same order."""
    if not _LEFT_OUT[version]:
        return State
    return msgspec.defstruct(
        "State",
        [
            (
                f.name,
                f.type,
                msgspec.field(default=f.default)
                if f.default_factory is msgspec.NODEFAULT
                else msgspec.field(default_factory=f.default_factory),
            )
            for f in msgspec.structs.fields(State)
            if f.name not in _LEFT_OUT[version]
        ],
        forbid_unknown_fields=True,
    )


_STATE_FRAMES = {version: _state_frame(version) for version in (2, 3, 4)}


def _snapshot_frame_type(version: int) -> type[msgspec.Struct]:
    """State with its jobs and runs left encoded (`msgspec.Raw`, views of the snapshot's bytes).
    Formats 3 and 4 must hold the cluster version, formats 1 and 2 must not have the fields they
    leave out."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for field in msgspec.structs.fields(State):
        if field.name in _LEFT_OUT[version]:
            continue
        if field.name in _DECODED_ONE_BY_ONE:
            fields.append((field.name, dict[str, msgspec.Raw], msgspec.field(default_factory=dict)))
        elif field.name == "cluster_version":
            fields.append((field.name, field.type))
        elif field.default_factory is not msgspec.NODEFAULT:
            fields.append((field.name, field.type, msgspec.field(default_factory=field.default_factory)))
        else:
            fields.append((field.name, field.type, field.default))
    fields.sort(key=lambda f: len(f) > 2)  # msgspec wants fields without a default first
    return msgspec.defstruct("SnapshotFrame", fields, forbid_unknown_fields=True)


# Decoded one job (one job's runs) at a time and shared at once: decoded whole, every job's copy
# of its spec and every run's copies of its strings lived until the end of the decode, between
# the records that stay: a follower restored with 100,000 jobs kept 223 MiB, now 94-97 (about
# what a node that applied the log holds).
_DECODED_ONE_BY_ONE = ("jobs", "runs")
# Any: the frame types are made at import time, so their fields are unknown to a type checker.
_frame_decoders: dict[int, msgspec.msgpack.Decoder[Any]] = {
    version: msgspec.msgpack.Decoder(_snapshot_frame_type(version)) for version in READABLE_SNAPSHOT_FORMAT_VERSIONS
}
_runs_decoder = msgspec.msgpack.Decoder(list[Run])


def decode_snapshot(data: bytes, max_log_format: int = LOG_FORMAT) -> State:
    header_len = len(SNAPSHOT_MAGIC) + 1
    version = data[header_len - 1] if len(data) >= header_len else None
    if not data.startswith(SNAPSHOT_MAGIC):
        raise CodecError("not a raftcron snapshot")
    if version not in READABLE_SNAPSHOT_FORMAT_VERSIONS:
        raise NewerLogFormat(f"not a raftcron snapshot of a known version ({version})")
    if SNAPSHOT_LOG_FORMATS[version] > max_log_format:
        raise NewerLogFormat(
            f"snapshot format {version} needs log format {SNAPSHOT_LOG_FORMATS[version]}, "
            f"this node reads up to {max_log_format}"
        )
    try:
        frame = _frame_decoders[version].decode(memoryview(data)[header_len:])
        fields = frame.__struct_fields__
        state = State(**{name: getattr(frame, name) for name in fields if name not in _DECODED_ONE_BY_ONE})
        _decode_jobs(state, frame.jobs, version)
        _decode_runs(state, frame.runs)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CodecError(f"undecodable snapshot: {exc}") from None
    if state.cluster_version > max_log_format:
        raise NewerLogFormat(
            f"the snapshot's cluster version is {state.cluster_version}, this node reads up to {max_log_format}"
        )
    # The live index is derived data: rebuilt so an older snapshot restores like a log replay.
    state.rebuild_live_index()
    state.rebuild_dependents()
    return state


class _JobV1(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A job as snapshot format 1 kept it: the whole spec, and every fact a field of its own."""

    spec: JobSpec
    version: int
    author: str
    updated_us: int
    cursor_us: int
    next_due_us: int
    paused: bool = False
    paused_by: str = ""
    paused_reason: str = ""
    last_status: str = ""
    last_scheduled_us: int = 0

    def upgraded(self) -> Job:
        return Job.of(
            self.spec,
            self.version,
            self.author,
            self.updated_us,
            self.cursor_us,
            self.next_due_us,
            self.paused,
            self.paused_by,
            self.paused_reason,
            self.last_status,
            self.last_scheduled_us,
        )


_job_decoders: dict[int, msgspec.msgpack.Decoder[_JobV1] | msgspec.msgpack.Decoder[Job]] = {
    1: msgspec.msgpack.Decoder(_JobV1),
    2: msgspec.msgpack.Decoder(Job),
    3: msgspec.msgpack.Decoder(Job),
    4: msgspec.msgpack.Decoder(Job),
}


def _decode_jobs(state: State, encoded: dict[str, msgspec.Raw], version: int) -> None:
    """Each job shares what applying would have shared before the next is decoded."""
    decoder = _job_decoders[version]
    for job_id, raw in encoded.items():
        job = decoder.decode(raw)
        job = job.upgraded() if isinstance(job, _JobV1) else job
        share_decoded_job(job, job_id)
        state.jobs[job_id] = job


def _decode_runs(state: State, encoded: dict[str, msgspec.Raw]) -> None:
    """Each run holds its job's id string and the status constant, not copies of its own."""
    for job_id, raw in encoded.items():
        runs = _runs_decoder.decode(raw)
        job = state.jobs.get(job_id)
        job_id = job.id if job is not None else job_id
        for run in runs:
            share_run(run, job_id)
        state.runs[job_id] = runs


def encode_result(result: Result) -> bytes:
    return _encoder.encode(result)


def decode_result(data: bytes) -> Result:
    return _result_decoder.decode(data)


def state_digest(state: State) -> str:
    """Equal on every replica that applied the same log; the byte-for-byte agreement check."""
    return hashlib.sha256(encode_snapshot(state)).hexdigest()
