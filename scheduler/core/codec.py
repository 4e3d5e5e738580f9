"""The only definition of the log and snapshot formats.

Command: one version byte, then a msgpack-encoded tagged command.
Snapshot: a magic, one version byte, then the msgpack-encoded State.
Encoding is deterministic (sorted map keys), so equal states give equal bytes,
and the digest of those bytes is how replicas prove they agree.
Golden files under tests/unit/golden keep old logs readable.
"""

from __future__ import annotations

import hashlib

import msgspec

from scheduler.core.commands import Command
from scheduler.core.results import Result
from scheduler.core.sharing import share_run, share_spec
from scheduler.core.state import State

COMMAND_FORMAT_VERSION = 1
SNAPSHOT_MAGIC = b"RCS"
SNAPSHOT_FORMAT_VERSION = 1


class CodecError(ValueError):
    """Bytes that are not a command or snapshot this version understands."""


_encoder = msgspec.msgpack.Encoder(order="deterministic")
_command_decoder = msgspec.msgpack.Decoder(Command)
_snapshot_decoder = msgspec.msgpack.Decoder(State)
_result_decoder = msgspec.msgpack.Decoder(Result)


def encode_command(command: Command) -> bytes:
    return bytes((COMMAND_FORMAT_VERSION,)) + _encoder.encode(command)


def decode_command(data: bytes) -> Command:
    if not data:
        raise CodecError("empty command")
    if data[0] != COMMAND_FORMAT_VERSION:
        raise CodecError(f"unknown command format version {data[0]}")
    try:
        return _command_decoder.decode(data[1:])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CodecError(f"undecodable command: {exc}") from None


def encode_snapshot(state: State) -> bytes:
    return SNAPSHOT_MAGIC + bytes((SNAPSHOT_FORMAT_VERSION,)) + _encoder.encode(state)


def decode_snapshot(data: bytes) -> State:
    header = SNAPSHOT_MAGIC + bytes((SNAPSHOT_FORMAT_VERSION,))
    if not data.startswith(header):
        raise CodecError("not a raftcron snapshot of a known version")
    try:
        state = _snapshot_decoder.decode(data[len(header) :])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CodecError(f"undecodable snapshot: {exc}") from None
    # The live index is derived data: rebuilt so an older snapshot restores like a log replay.
    state.rebuild_live_index()
    share_decoded(state)
    return state


def share_decoded(state: State) -> None:
    """A decoded snapshot holds a copy of every string per record: share them as applying would."""
    for job in state.jobs.values():
        job.spec = share_spec(job.spec)
    for job_id, runs in state.runs.items():
        job = state.jobs.get(job_id)
        for run in runs:
            share_run(run, job.spec.id if job is not None else job_id)


def encode_result(result: Result) -> bytes:
    return _encoder.encode(result)


def decode_result(data: bytes) -> Result:
    return _result_decoder.decode(data)


def state_digest(state: State) -> str:
    """Equal on every replica that applied the same log; the byte-for-byte agreement check."""
    return hashlib.sha256(encode_snapshot(state)).hexdigest()
