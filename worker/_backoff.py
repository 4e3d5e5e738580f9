"""Retry pacing and quiet logging for calls that fail while the cluster is unreachable."""

from __future__ import annotations

import logging
import random
import time

import grpc

__all__ = ["Backoff", "FailureLog", "describe_rpc_error"]


class Backoff:
    """Exponential delays with jitter: initial_s, then doubling up to max_s.

    Each delay is drawn from [d/2, d], so workers that lost the same node do not all come back
    at the same instant (no thundering herd on the new leader).
    """

    def __init__(self, initial_s: float = 0.2, max_s: float = 10.0, rng: random.Random | None = None) -> None:
        if not 0 < initial_s <= max_s:
            raise ValueError(f"need 0 < initial_s <= max_s, got {initial_s!r}, {max_s!r}")
        self.initial_s = initial_s
        self.max_s = max_s
        self._next_s = initial_s
        # The module's generator by default: a Random() of its own per Backoff reads the OS's
        # entropy, a cost every reported outcome would pay (each report has a Backoff).
        self._rng = rng or random

    def next_delay_s(self) -> float:
        delay = self._next_s
        self._next_s = min(self.max_s, self._next_s * 2)
        return self._rng.uniform(delay / 2, delay)

    def reset(self) -> None:
        self._next_s = self.initial_s


def describe_rpc_error(error: BaseException) -> str:
    """'CODE: first line of the details', short enough for one log line."""
    if isinstance(error, grpc.Call):
        details = (error.details() or "").strip().splitlines()
        return f"{error.code().name}: {details[0] if details else ''}".rstrip(": ")
    return f"{type(error).__name__}: {error}"


class FailureLog:
    """Logs a failing operation once when it starts failing, a reminder every `remind_s`, and
    once when it recovers, instead of one line per retry."""

    def __init__(self, logger: logging.Logger, what: str, remind_s: float = 30.0) -> None:
        self._log = logger
        self._what = what
        self._remind_s = remind_s
        self._failures = 0
        self._first_at = 0.0
        self._reminded_at = 0.0

    @property
    def failing(self) -> bool:
        return self._failures > 0

    def failed(self, error: BaseException) -> None:
        now = time.monotonic()
        self._failures += 1
        if self._failures == 1:
            self._first_at = self._reminded_at = now
            self._log.warning("%s failed (%s); retrying with backoff", self._what, describe_rpc_error(error))
        elif now - self._reminded_at >= self._remind_s:
            self._reminded_at = now
            self._log.warning(
                "%s still failing after %d attempts over %.0fs (%s)",
                self._what,
                self._failures,
                now - self._first_at,
                describe_rpc_error(error),
            )
        else:
            self._log.debug("%s failed again (%s)", self._what, describe_rpc_error(error))

    def succeeded(self) -> None:
        if self._failures:
            self._log.info(
                "%s works again after %d failed attempts over %.1fs",
                self._what,
                self._failures,
                time.monotonic() - self._first_at,
            )
        self._failures = 0
