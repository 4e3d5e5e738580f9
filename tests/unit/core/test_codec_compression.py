"""Large commands are stored zlib-compressed under their own format byte; small ones are not."""

from __future__ import annotations

import zlib

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
from scheduler.core.commands import ApplyJobs, JobUpsert, ReadBarrier
from tests.fakes import spec


def _apply(jobs: int) -> ApplyJobs:
    upserts = tuple(JobUpsert(spec(f"job-{n:05d}", schedule=f"{n % 60} {n % 24} * * *"), 0, 1) for n in range(jobs))
    return ApplyJobs(issued_at_us=1, author="alice", request_id="r", upserts=upserts)


def test_a_large_apply_is_compressed_about_tenfold_and_reads_back_equal() -> None:
    command = _apply(5_000)
    data = encode_command(command)
    assert data[0] == COMPRESSED_COMMAND_FORMAT_VERSION
    plain = len(encode_command(_apply(100))) * 50  # what 5,000 jobs take uncompressed, near enough
    assert len(data) * 5 < plain
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
