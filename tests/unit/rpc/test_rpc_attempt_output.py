"""The proposing node bounds what an attempt wrote, and leaves out what it did not."""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core.commands import Completion, LeaseRef
from scheduler.rpc.attempt_output import attempt_output, tail_of, without_attempt_output
from worker.api.v1 import worker_pb2 as wpb


def test_the_tail_keeps_the_last_bytes_and_never_splits_a_character() -> None:
    assert tail_of("short", 4096) == "short"
    assert tail_of("x" * 10_000 + "END", 4096) == ("x" * 10_000 + "END")[-4096:]
    cut = tail_of("é" * 3000, 4095)  # 2 bytes each: 4095 falls inside one
    assert cut == "é" * 2047 and len(cut.encode()) <= 4095
    assert tail_of("anything", 0) == ""


def test_each_stream_is_bounded_apart_and_empty_fields_stay_out() -> None:
    request = wpb.CompleteRequest(stdout_tail="o" * 9000 + "!", stderr_tail="e" * 100)
    found = attempt_output(request, 4096)
    assert found == {"stdout_tail": ("o" * 9000 + "!")[-4096:], "stderr_tail": "e" * 100}
    assert attempt_output(wpb.CompleteRequest(output_tail="old readers only"), 4096) == {}
    assert attempt_output(wpb.CompleteRequest(exception_type="ValueError", http_status=503), 4096) == {
        "exception_type": "ValueError",
        "http_status": 503,
    }


def test_a_node_keeping_no_output_still_keeps_how_the_attempt_ended() -> None:
    found = attempt_output(wpb.CompleteRequest(stdout_tail="out", exception_type="KeyError"), 0)
    assert found == {"exception_type": "KeyError"}


def test_below_log_format_3_the_fields_are_left_out_and_the_combined_tail_stays() -> None:
    full = Completion(LeaseRef("a", 1, 2), "w", "failure", output_tail="both", stdout_tail="o", http_status=500)
    older = without_attempt_output(full)
    assert (older.stdout_tail, older.http_status, older.output_tail) == (UNSET, UNSET, "both")
    quiet = Completion(LeaseRef("a", 1, 2), "w", "success")
    assert without_attempt_output(quiet) is quiet
