"""Payloads: any JSON value, stored as canonical JSON text.

A job file's `payload` is turned into that text by the reader; a spec's `payload_json` (from a
file or from gRPC) must already be it, which the rules check.
"""

from __future__ import annotations

import datetime
import json
import math

from scheduler.planning.durations import type_name
from scheduler.specs.problems import _short

MAX_PAYLOAD_BYTES = 64 * 1024
MAX_PAYLOAD_DEPTH = 32


class _PayloadProblem(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def canonical_payload_json(value: object) -> str:
    """The canonical JSON text stored for a payload value; raises ValueError if it may not be one."""
    try:
        return _canonical(value)
    except _PayloadProblem as problem:
        raise ValueError(f"{problem.field}: {problem.message}") from None


def _canonical(value: object) -> str:
    _check_json_value(value, "payload", 0, [0])
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_PAYLOAD_BYTES:  # ASCII only (json.dumps escapes the rest): chars = bytes
        raise _PayloadProblem("payload", f"is {len(text)} bytes as JSON; at most 64 KiB is allowed")
    return text


def _check_json_value(value: object, path: str, depth: int, seen: list[int]) -> None:
    # Every value costs at least one byte of JSON, so counting them bounds the work even for
    # YAML alias trees whose expanded size is exponential.
    seen[0] += 1
    if seen[0] > MAX_PAYLOAD_BYTES:
        raise _PayloadProblem("payload", "is larger than 64 KiB as JSON")
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _PayloadProblem(path, f"must be a finite number, got {value}")
        return
    if not isinstance(value, (dict, list)):
        hint = " (quote it to keep it as text)" if isinstance(value, datetime.date) else ""
        raise _PayloadProblem(path, f"{type_name(value)} is not a JSON value{hint}")
    if depth + 1 > MAX_PAYLOAD_DEPTH:
        raise _PayloadProblem(path, f"nests deeper than {MAX_PAYLOAD_DEPTH} levels")
    if isinstance(value, list):
        for position, item in enumerate(value):
            _check_json_value(item, f"{path}[{position}]", depth + 1, seen)
        return
    for key, item in value.items():
        if not isinstance(key, str):
            raise _PayloadProblem(path, f"key {key!r} is not a string (quote it)")
        _check_json_value(item, f"{path}.{_short(key, 40)}", depth + 1, seen)


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not allowed")


def canonical_payload_text(text: str) -> str:
    """Caller JSON text (a trigger's payload), in any layout, as the canonical text stored;
    ValueError saying why it may not be one. The request's size is bounded before this runs."""
    if not text:
        return ""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError(f"payload nests deeper than {MAX_PAYLOAD_DEPTH} levels") from None
    except ValueError as error:
        raise ValueError(f"payload is not JSON: {error}") from None
    return canonical_payload_json(value)


def _payload_json_problem(text: object) -> str | None:
    if not isinstance(text, str):
        return f"must be JSON text, not {type_name(text)}"
    if not text:
        return None
    if len(text) > MAX_PAYLOAD_BYTES:
        return f"is {len(text)} characters long; at most 64 KiB is allowed"
    try:
        value = json.loads(text, parse_constant=_reject_constant)
        canonical = _canonical(value)
    except _PayloadProblem as problem:
        inside = "" if problem.field == "payload" else f"{problem.field}: "
        return inside + problem.message
    except RecursionError:
        return f"nests deeper than {MAX_PAYLOAD_DEPTH} levels"
    except ValueError as error:
        return f"is not valid JSON: {error}"
    if canonical != text:
        return (
            "must be canonical JSON: sorted keys, no spaces, non-ASCII escaped"
            " (json.dumps with sort_keys=True, separators=(',', ':'))"
        )
    return None
