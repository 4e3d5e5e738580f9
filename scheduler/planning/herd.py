"""Inputs for spreading round-time herds: which schedules herd, and a per-job offset.

Thousands of jobs written as ``0 * * * *`` or ``@daily`` all fire at the same instant. The
leader may delay each such job by a deterministic offset hashed from its id (the run key keeps
the nominal instant). The offset must be the same on every node and in every release, hence a
named cryptographic hash and never Python's per-process salted ``hash()``.
"""

from __future__ import annotations

import hashlib

from .schedule import Schedule

# Domain separation: the same job id hashed for another purpose gives unrelated numbers.
_JITTER_PERSONALIZATION = b"raftcron.jitter"


def jitter_offset_us(job_id: str, window_us: int) -> int:
    """A deterministic offset in ``[0, window_us)`` for ``job_id``; 0 when the window is 0.

    BLAKE2b-64 of the UTF-8 id, reduced modulo the window. The modulo bias is below
    window/2**64, i.e. nothing measurable for any window up to years in microseconds.
    Changing this function moves every spread job: tests pin its values.
    """
    if window_us < 0:
        raise ValueError(f"window_us must not be negative, got {window_us}")
    if window_us == 0:
        return 0
    digest = hashlib.blake2b(job_id.encode("utf-8"), digest_size=8, person=_JITTER_PERSONALIZATION).digest()
    return int.from_bytes(digest, "big") % window_us


def lands_on_round_instant(schedule: Schedule) -> bool:
    """Whether every fire of ``schedule`` is nominally at minute 0, second 0 of some hour.

    The rule is exactly: the seconds field allows only 0 (always true for 5-field expressions)
    and the minute field allows only 0, whatever the hour and day fields say. So ``0 * * * *``,
    ``@hourly``, ``@daily``, ``0 9 * * 1-5`` are round; ``30 2 * * *``, ``0,30 * * * *`` and
    ``*/10 0 * * * *`` are not. Fires shifted to a DST gap's end are judged by their nominal
    slot, like everything else about herds.
    """
    fields = schedule.fields
    return fields.seconds == (0,) and fields.minutes == (0,)
