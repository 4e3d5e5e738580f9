"""What an attempt wrote, as the node that proposes its completion bounds it.

A worker reports the end of each stream (stdout and stderr apart), an exception type and an HTTP
status. The proposing node keeps at most `output_tail_bytes` of UTF-8 of each stream (node
config; the end, where the failure usually is) and leaves UNSET whatever is empty, so a
completion without output encodes exactly as before (docs/design/output-per-attempt.md).
"""

from __future__ import annotations

import msgspec

from scheduler.core.commands import Completion

DEFAULT_OUTPUT_TAIL_BYTES = 4096
# Per stream: 64 KiB x 2 streams x the attempts of a run x the runs a job keeps is already large.
MAX_OUTPUT_TAIL_BYTES = 64 * 1024
EXCEPTION_TYPE_BYTES = 200
# The fields a completion of log format 3 carries for its attempt.
ATTEMPT_OUTPUT_FIELDS = ("stdout_tail", "stderr_tail", "exception_type", "http_status")


def tail_of(text: str, limit_bytes: int) -> str:
    """The end of `text`, at most `limit_bytes` of UTF-8, never a broken character."""
    if len(text) * 4 <= limit_bytes:  # no UTF-8 encoding of it can be longer
        return text
    data = text.encode("utf-8")
    if len(data) <= limit_bytes:
        return text
    return data[len(data) - limit_bytes :].decode("utf-8", errors="ignore") if limit_bytes > 0 else ""


def head_of(text: str, limit_bytes: int) -> str:
    """The start of `text`, at most `limit_bytes` of UTF-8."""
    data = text.encode("utf-8")
    return text if len(data) <= limit_bytes else data[:limit_bytes].decode("utf-8", errors="ignore")


def attempt_output(request, tail_bytes: int) -> dict:
    """Completion keyword arguments for the per-attempt fields `request` (a CompleteRequest)
    sets, each bounded; {} when it sets none (the common, cheap case)."""
    stdout, stderr, exception, status = (
        request.stdout_tail,
        request.stderr_tail,
        request.exception_type,
        request.http_status,
    )
    if not (stdout or stderr or exception or status):
        return {}
    found: dict = {}
    if stdout and tail_bytes:
        found["stdout_tail"] = tail_of(stdout, tail_bytes)
    if stderr and tail_bytes:
        found["stderr_tail"] = tail_of(stderr, tail_bytes)
    if exception:
        found["exception_type"] = head_of(exception, EXCEPTION_TYPE_BYTES)
    if status:
        found["http_status"] = status
    return found


def has_attempt_output(completion: Completion) -> bool:
    return not (
        completion.stdout_tail is msgspec.UNSET
        and completion.stderr_tail is msgspec.UNSET
        and completion.exception_type is msgspec.UNSET
        and completion.http_status is msgspec.UNSET
    )


def without_attempt_output(completion: Completion) -> Completion:
    """`completion` as a cluster below log format 3 may apply it: its combined output_tail stays."""
    if not has_attempt_output(completion):
        return completion
    return msgspec.structs.replace(completion, **dict.fromkeys(ATTEMPT_OUTPUT_FIELDS, msgspec.UNSET))
