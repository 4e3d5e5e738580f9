"""Large commands are stored zlib-compressed under their own format byte; small ones are not."""

from __future__ import annotations

import zlib

import msgspec
import pytest

from scheduler.core.codec import (
    COMMAND_FORMAT_VERSION,
    COMPRESS_ABOVE_BYTES,
    COMPRESSED_COMMAND_FORMAT_VERSION,
    MAX_DECOMPRESSED_BYTES,
    CodecError,
    decode_command,
    encode_command,
)
from scheduler.core.commands import ApplyJobs, ClaimRuns, JobUpsert, ReadBarrier, SlotClaim
from tests.fakes import spec


def _apply(jobs: int) -> ApplyJobs:
    upserts = tuple(JobUpsert(spec(f"job-{n:05d}", schedule=f"{n % 60} {n % 24} * * *"), 0, 1) for n in range(jobs))
    return ApplyJobs(issued_at_us=1, author="alice", request_id="r", upserts=upserts)


def test_a_large_apply_is_compressed_about_tenfold_and_reads_back_equal() -> None:
    command = _apply(5_000)
    data = encode_command(command)
    assert data[0] == COMPRESSED_COMMAND_FORMAT_VERSION
    assert len(data) * 5 < len(msgspec.msgpack.encode(command))
    assert decode_command(data) == command


def test_a_herds_claim_batch_is_compressed() -> None:
    """1,000 claims, the trigger loop's batch: each entry is journaled and sent by every node."""
    at_us, next_us = 1_796_457_996_000_000, 1_796_544_396_000_000
    claims = tuple(SlotClaim(f"team-{n % 40}/report-{n * 7919 % 100_003}", at_us, next_us, 1) for n in range(1_000))
    command = ClaimRuns(issued_at_us=at_us, epoch=3, claims=claims, monotonic_us=12)
    data = encode_command(command)
    assert data[0] == COMPRESSED_COMMAND_FORMAT_VERSION
    assert len(data) * 3 < len(msgspec.msgpack.encode(command))
    assert decode_command(data) == command


def test_small_commands_keep_the_plain_format() -> None:
    data = encode_command(ReadBarrier(issued_at_us=5))
    assert data[0] == COMMAND_FORMAT_VERSION and len(data) < COMPRESS_ABOVE_BYTES


@pytest.mark.parametrize(
    "body",
    [
        zlib.compress(b"\0" * (MAX_DECOMPRESSED_BYTES + 1)),  # inflates past the cap
        zlib.compress(b"x" * 100_000)[:-10],  # truncated
        b"not zlib at all",
    ],
    ids=["bomb", "truncated", "garbage"],
)
def test_a_bad_compressed_entry_is_a_codec_error_not_a_crash(body: bytes) -> None:
    with pytest.raises(CodecError):
        decode_command(bytes((COMPRESSED_COMMAND_FORMAT_VERSION,)) + body)
