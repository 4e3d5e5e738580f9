"""Rolling upgrades: what log format each peer reads, and the guard in front of every proposal.

Every node's keepalive (one a second to every peer, see raftlog.py) carries the newest log format
it reads: `{"type": "raftcron_keepalive", "log_format": 2}`. A keepalive without one comes from
a node that predates the cluster version, which reads format 1. pysyncobj drops message types it
does not know, so `LogFormatMixin` reads keepalives before it does. No node writes a log entry to
advertise: an old node could not write one, and its keepalives already say what it reads.

The decision to raise the cluster version is the leader's (scheduler/leader/cluster_version.py);
what may be proposed is decided here, from the replicated cluster version alone, so every node
refuses the same commands whatever it has heard.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from scheduler.core.commands import ApplyJobs, SetClusterVersion
from scheduler.core.log_format import BASE_LOG_FORMAT, CRON_MODIFIERS_FORMAT, LOG_FORMAT, required_log_format
from scheduler.core.vocabulary import TargetKind
from scheduler.planning.cron_fields import uses_quartz_modifiers
from scheduler.replication.pysyncobj_compat import ON_MESSAGE_RECEIVED, overrides

KEEPALIVE_TYPE = "raftcron_keepalive"
# A test knob: a node started with it advertises, and decodes, no format above it, as a node of an
# older version would. Never set in production; it only makes a node refuse more.
TEST_CAP_ENV = "RAFTCRON_TEST_MAX_LOG_FORMAT"
# An advertisement older than this is not counted (keepalives come every second).
ADVERT_MAX_AGE_S = 5.0


def own_log_format(environ: Mapping[str, str] = os.environ) -> int:
    """The newest log format this process reads: LOG_FORMAT, or less under the test knob."""
    raw = environ.get(TEST_CAP_ENV, "")
    if not raw:
        return LOG_FORMAT
    try:
        cap = int(raw)
    except ValueError:
        raise ValueError(f"{TEST_CAP_ENV}={raw!r} is not a whole number") from None
    if not BASE_LOG_FORMAT <= cap <= LOG_FORMAT:
        raise ValueError(f"{TEST_CAP_ENV}={cap} is outside {BASE_LOG_FORMAT}..{LOG_FORMAT}")
    return cap


def keepalive_message(log_format: int) -> dict:
    return {"type": KEEPALIVE_TYPE, "log_format": log_format}


def advertised_format(message) -> int | None:
    """The log format a keepalive advertises (1 when it names none), None for other messages."""
    if not isinstance(message, dict) or message.get("type") != KEEPALIVE_TYPE:
        return None
    value = message.get("log_format", BASE_LOG_FORMAT)
    return (
        value
        if isinstance(value, int) and not isinstance(value, bool) and value >= BASE_LOG_FORMAT
        else BASE_LOG_FORMAT
    )


class FormatBook:
    """Raft address -> (log format advertised, monotonic time heard). Written by the tick thread."""

    def __init__(self, clock_s: Callable[[], float] = time.monotonic) -> None:
        self._clock_s = clock_s
        self._lock = threading.Lock()
        self._heard: dict[str, tuple[int, float]] = {}

    def record(self, address: str, log_format: int) -> None:
        with self._lock:
            self._heard[address] = (log_format, self._clock_s())

    def fresh(self, max_age_s: float = ADVERT_MAX_AGE_S) -> dict[str, int]:
        """What each peer advertised within the last `max_age_s`."""
        oldest = self._clock_s() - max_age_s
        with self._lock:
            return {address: fmt for address, (fmt, at) in self._heard.items() if at >= oldest}


class LogFormatMixin:
    """Mix into the pysyncobj SyncObj subclass, first in the bases: it reads keepalives (which
    pysyncobj would drop unread) into a FormatBook, and holds this node's own keepalive."""

    def __init__(self, *args, log_format: int | None = None, format_book: FormatBook | None = None, **kwargs) -> None:
        # Set before SyncObj's constructor: attributes that exist by then stay out of snapshots.
        self.keepalive_message = keepalive_message(own_log_format() if log_format is None else log_format)
        self.format_book = format_book if format_book is not None else FormatBook()
        super().__init__(*args, **kwargs)

    @overrides(ON_MESSAGE_RECEIVED)
    def _read_keepalives(self, node, message):
        advertised = advertised_format(message)
        if advertised is not None:
            address = getattr(node, "address", None)
            if address:
                self.format_book.record(address, advertised)
            return None
        return getattr(super(), ON_MESSAGE_RECEIVED)(node, message)


def proposal_log_format(command) -> tuple[int, str]:
    """The log format a proposal needs, and what to call it in a refusal: what the core's table
    says, and a job schedule using the cron modifiers L, W or # (text to the core)."""
    needed = required_log_format(command)
    if isinstance(command, ApplyJobs) and needed < CRON_MODIFIERS_FORMAT:
        for upsert in command.upserts:
            if uses_quartz_modifiers(upsert.spec.schedule):
                return CRON_MODIFIERS_FORMAT, f"the cron modifiers L, W and # (job {upsert.spec.id})"
    if isinstance(command, ApplyJobs):
        for upsert in command.upserts:
            if upsert.spec.target_kind == TargetKind.HTTP:
                return needed, f"an HTTP target (job {upsert.spec.id})"
    return needed, type(command).__name__


def laggards(needed: int, voters: Iterable[str], advertised: dict[str, int]) -> list[tuple[str, int | None]]:
    """Voters that have not advertised `needed` (with what they advertised; None: not heard)."""
    return [(voter, advertised.get(voter)) for voter in sorted(voters) if advertised.get(voter, 0) < needed]


def proposal_refusal(
    command,
    needed: int,
    cluster_version: int,
    voters: Iterable[str],
    advertised: dict[str, int],
    name_of: Callable[[str], str] = str,
    what: str = "",
) -> str | None:
    """Why `command` (which needs log format `needed`) may not be proposed now, or None.

    The replicated cluster version decides, so every node refuses the same commands. The one
    command above it is the one that raises it, and only once every voter has advertised that
    it reads the new format (the leader's loop proposes it then; see leader/cluster_version.py)."""
    if needed <= cluster_version:
        return None
    behind = laggards(needed, voters, advertised)
    if isinstance(command, SetClusterVersion) and not behind:
        return None
    return format_refusal(what or type(command).__name__, needed, cluster_version, behind, name_of)


def format_refusal(
    what: str, needed: int, cluster_version: int, behind: list[tuple[str, int | None]], name_of: Callable[[str], str]
) -> str:
    """'the cluster runs log format 1; upgrade n3 (advertises 1) before using X (log format 2)'."""
    names = ", ".join(
        f"{name_of(address)} ({'advertises ' + str(fmt) if fmt is not None else 'not heard from'})"
        for address, fmt in behind
    )
    advice = f"upgrade {names}" if names else "wait until the leader raises it (every voter advertises it)"
    return f"the cluster runs log format {cluster_version}; {advice} before using {what} (log format {needed})"


class UndecodableEntry(Exception):
    """A committed entry (or a snapshot) this node cannot decode. Every entry in the log was
    encoded by a node (clients never hand the log bytes), so this node is older than the node
    that wrote it, or the bytes are damaged: either way, applying on would diverge."""

    def __init__(self, where: str, reason: str, older: bool) -> None:
        self.where, self.reason, self.older = where, reason, older
        if older:
            text = f"this node is older than the log: upgrade it ({where}: {reason})"
        else:
            text = f"this node cannot decode the log and stops applying rather than diverge ({where}: {reason})"
        super().__init__(text)
