"""The one readable form of a run key, `job@2026-12-01T18:59:00Z`, and the way back.

People, handlers, logs and alerts see this form (seconds, with six fractional digits only when
the instant has them: `format_us`). Replicated state keeps its own bytes: the core names runs
`job@MICROSECONDS` inside reasons and alert ids (`scheduler/core/model.py` `format_run_key`),
and changing those bytes would change what replicas hold, so such text is only *shown*
readable, through `readable_run_keys_in`.
"""

from __future__ import annotations

import re

from .timeconv import format_us, parse_iso_to_us

# `job@MICROSECONDS` as the core writes it: the id (no spaces, as ids never have) and 1 to 17
# digits (9999-12-31 is 2.5e17 us), not followed by what would make them part of a date, a
# decimal or a word (`a@2026-12-01...` is already readable).
_STORED_KEY = re.compile(r"(?<=[^\s@])@(\d{1,17})(?![\w.:+-])")


def readable_run_key(job_id: str, scheduled_us: int) -> str:
    """`nightly@2026-12-01T18:59:00Z`; `parse_run_key` reads it back."""
    return f"{job_id}@{format_us(scheduled_us)}"


def parse_run_key(run_key: str) -> tuple[str, int]:
    """(job id, instant in microseconds) of `job@ISO-8601` or `job@MICROSECONDS`; ValueError otherwise."""
    job_id, sep, instant = run_key.strip().rpartition("@")
    if not sep or not job_id or not instant:
        raise ValueError(f"run key {run_key!r} is not JOB@INSTANT (e.g. nightly@2026-12-01T18:59:00Z)")
    if instant.isdigit():
        return job_id, int(instant)
    try:
        return job_id, parse_iso_to_us(instant)
    except ValueError:
        raise ValueError(
            f"run key {run_key!r}: {instant!r} is not an ISO-8601 instant (e.g. nightly@2026-12-01T18:59:00Z)"
        ) from None


def readable_run_keys_in(text: str) -> str:
    """`text` with each stored `job@MICROSECONDS` shown readable: for reasons and alert ids that
    replicated state holds in the stored form (`skip: run a@1764615540000000 still live`)."""
    return _STORED_KEY.sub(lambda match: "@" + format_us(int(match[1])), text)
