"""What a Python handler writes while it runs: its stdout, its stderr and its `logging` records,
kept (bounded) for the attempt's output tail.

Several attempts run at once in one worker process, each on its own thread, so the capture is
per attempt: `sys.stdout` and `sys.stderr` are replaced, once, by streams that copy a write to
the capture of the attempt the writing code runs for (a context variable, set by `capturing`),
and still pass it on to the real stream, so the worker's console shows what it showed before.
A hook where log records are made does the same for `logging`. The worker's own loggers
(`raftcron.*`) are left out: "run X failed" is the worker talking, not the handler.

Not captured: writes to file descriptors 1 and 2 below Python (a C library, a subprocess that
inherits them) and writes from threads the handler starts itself (a new thread starts with an
empty context). Under process isolation the child runs one attempt at a time, so the same
machinery captures everything its Python code writes.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import threading
from collections import deque
from collections.abc import Iterator
from typing import TextIO

__all__ = ["Capture", "capturing", "current_capture", "install", "set_capture"]

# Each stream keeps about this much; the tails sent are cut to the worker's tail limit later.
KEEP_BYTES = 8192
_OWN_LOGGERS = "raftcron"


class _Tail:
    """The last `KEEP_BYTES` or so of a stream of text."""

    def __init__(self) -> None:
        self._parts: deque[str] = deque()
        self._size = 0

    def add(self, text: str) -> None:
        self._parts.append(text)
        self._size += len(text)
        while self._size > KEEP_BYTES:
            excess = self._size - KEEP_BYTES
            first = self._parts[0]
            if len(first) <= excess:
                self._parts.popleft()
                self._size -= len(first)
            else:  # keep the end of the oldest part still needed
                self._parts[0] = first[excess:]
                self._size -= excess

    def text(self) -> str:
        return "".join(self._parts)


class Capture:
    """One attempt's output: stdout, stderr (log records included), and both interleaved."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the handler's own threads may share its context
        self._stdout = _Tail()
        self._stderr = _Tail()
        self._combined = _Tail()

    def write(self, stream: str, text: str) -> None:
        if not text:
            return
        with self._lock:
            (self._stdout if stream == "stdout" else self._stderr).add(text)
            self._combined.add(text)

    def extend(self, stdout: str, stderr: str, combined: str) -> None:
        """Append what another capture took (`take`): each stream to its own tail, so the tails
        are those of one capture that saw every write."""
        with self._lock:
            for tail, text in ((self._stdout, stdout), (self._stderr, stderr), (self._combined, combined)):
                if text:
                    tail.add(text)

    def take(self) -> tuple[str, str, str] | None:
        """Stdout, stderr and combined written since the last take (None if nothing), emptied."""
        with self._lock:
            if not self._combined._size:
                return None
            taken = (self._stdout.text(), self._stderr.text(), self._combined.text())
            self._stdout, self._stderr, self._combined = _Tail(), _Tail(), _Tail()
            return taken

    @property
    def stdout(self) -> str:
        with self._lock:
            return self._stdout.text()

    @property
    def stderr(self) -> str:
        with self._lock:
            return self._stderr.text()

    @property
    def combined(self) -> str:
        with self._lock:
            return self._combined.text()


_current: contextvars.ContextVar[Capture | None] = contextvars.ContextVar("raftcron_capture", default=None)


def current_capture() -> Capture | None:
    return _current.get()


def set_capture(capture: Capture | None) -> None:
    """Capture into `capture` for the rest of the current context (an asyncio task's own)."""
    if capture is not None:
        _current.set(capture)


@contextlib.contextmanager
def capturing(capture: Capture | None = None) -> Iterator[Capture]:
    """Capture what the code run inside writes (in this thread and its context) into `capture`."""
    install()
    capture = capture or Capture()
    token = _current.set(capture)
    try:
        yield capture
    finally:
        _current.reset(token)


class _TeeStream:
    """Stands for sys.stdout or sys.stderr: writes go to the real stream, and to the current
    attempt's capture if there is one."""

    def __init__(self, name: str, real: TextIO) -> None:
        self._name = name
        self._real = real

    def write(self, text: str) -> int:
        capture = _current.get()
        if capture is not None:
            capture.write(self._name, str(text))
        return self._real.write(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._real.flush()

    def __getattr__(self, name: str):  # encoding, isatty, fileno, buffer...: the real stream's
        return getattr(self._real, name)


_FORMAT = logging.Formatter("%(levelname)s %(name)s: %(message)s")


def _capture_record(record: logging.LogRecord) -> None:
    capture = _current.get()
    if capture is None or record.name == _OWN_LOGGERS or record.name.startswith(_OWN_LOGGERS + "."):
        return
    try:
        capture.write("stderr", _FORMAT.format(record) + "\n")
    except Exception:  # noqa: BLE001 (a record that does not format must not fail the run)
        capture.write("stderr", f"{record.levelname} {record.name}: {record.msg!r} (not formatted)\n")


_install_lock = threading.Lock()
_factory_installed = False


def install() -> None:
    """Put the capturing streams and the log record hook in place (idempotent). A stream
    replaced after this (a test's capsys, a user's redirect) is wrapped again at the next attempt.

    Records are caught where they are made (the record factory) rather than by a handler on the
    root logger: a handler there would turn off `logging.lastResort`, and an unconfigured
    program's warnings would vanish from its console.
    """
    global _factory_installed
    with _install_lock:
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is not None and not isinstance(stream, _TeeStream):
                setattr(sys, name, _TeeStream(name, stream))
        if not _factory_installed:
            previous = logging.getLogRecordFactory()

            def factory(*args, **kwargs) -> logging.LogRecord:
                record = previous(*args, **kwargs)
                _capture_record(record)
                return record

            logging.setLogRecordFactory(factory)
            _factory_installed = True
