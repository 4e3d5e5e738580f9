"""Replication failures: exceptions from propose(), kept apart from the core's rejections.

Retry intent lives on the type: `retry_safe` says whether the command certainly
did not commit (safe to resend as is); otherwise the outcome is unknown and only
commands with a request id (or idempotent by run key) may be resent.
"""

from __future__ import annotations


class ReplicationError(Exception):
    retry_safe = False

    def __init__(self, message: str, leader_hint: str = "") -> None:
        super().__init__(message)
        self.leader_hint = leader_hint


class NotLeader(ReplicationError):
    """No leader is known, or the entry was refused before it was appended."""

    retry_safe = True


class Overloaded(ReplicationError):
    """The local command queue is full; nothing was appended."""

    retry_safe = True


class EntryTooLarge(ReplicationError, ValueError):
    """The command encodes to more than one log entry may hold; nothing was appended."""

    retry_safe = False  # resending the same command fails the same way


class OutcomeUnknown(ReplicationError):
    """Leadership changed while the entry was in flight: it may or may not commit."""


class ReplicationTimeout(OutcomeUnknown):
    """No answer in time: the entry may still commit later."""


class LogFormatNotEnabled(ReplicationError):
    """The command needs a log format above the cluster version: some voter could not decode it.
    Nothing was appended; the message names the nodes to upgrade."""

    retry_safe = True  # nothing was appended, but resending fails the same way until they are upgraded


class NodeHalted(ReplicationError):
    """This node met a committed entry or snapshot it cannot decode and stopped applying (see
    upgrades.py); nothing was appended here. Other nodes may take the call."""

    retry_safe = True
