"""A shell attempt's stdout and stderr are kept apart (each bounded) and reported with it."""

from __future__ import annotations

from worker._completion import complete_request
from worker._execution import execute
from worker._shell import ShellCommand
from worker.api.v1 import worker_pb2
from worker.testing import make_context


def test_stdout_and_stderr_are_kept_apart_and_interleaved_for_older_readers() -> None:
    result = ShellCommand("echo to-out; echo to-err >&2; echo more-out")(make_context())
    assert result.stdout_tail == "to-out\nmore-out\n"
    assert result.stderr_tail == "to-err\n"
    assert sorted(result.output_tail.splitlines()) == ["more-out", "to-err", "to-out"]


def test_each_stream_keeps_its_own_last_bytes() -> None:
    command = ShellCommand("head -c 20000 /dev/zero | tr '\\0' o; echo OUT-END; echo ERR-ONLY >&2", tail_bytes=1024)
    result = command(make_context())
    assert len(result.stdout_tail.encode()) == 1024 and result.stdout_tail.endswith("OUT-END\n")
    assert result.stderr_tail == "ERR-ONLY\n"  # a flood on stdout does not push stderr out
    assert len(result.output_tail.encode()) <= 1024


def test_a_failed_attempt_reports_both_streams_with_its_exit_code() -> None:
    outcome = execute(ShellCommand("echo partial; echo broken >&2; exit 4"), make_context())
    assert (outcome.kind, outcome.exit_code) == ("FAILURE", 4)
    assert (outcome.stdout_tail, outcome.stderr_tail) == ("partial\n", "broken\n")
    request = complete_request("w", worker_pb2.LeaseRef(job_id="a"), outcome)
    assert (request.stdout_tail, request.stderr_tail, request.exit_code) == ("partial\n", "broken\n", 4)


def test_lines_written_in_pieces_are_not_spliced_in_the_interleaved_tail() -> None:
    command = ShellCommand("printf 'err-' >&2; sleep 0.1; echo out; sleep 0.1; echo line >&2")
    result = command(make_context())
    assert (result.stdout_tail, result.stderr_tail) == ("out\n", "err-line\n")
    assert result.output_tail == "out\nerr-line\n"
