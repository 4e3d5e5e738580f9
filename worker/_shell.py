"""The shell executor: runs `target: {shell: CMD}` jobs as `/bin/sh -c CMD`.

Each command runs in a new session, so it and everything it starts share one process group,
and the run owns that group: when the run is cancelled (deadline, fenced lease, worker drain)
the whole group gets SIGTERM, then SIGKILL after a grace period; when the command exits, any
process it left behind in the group is stopped the same way. (A process that starts its own
session escapes the group; nothing short of a cgroup can track it.)

The command sees the run through environment variables (RAFTCRON_JOB_ID, RAFTCRON_RUN_KEY,
RAFTCRON_SCHEDULED_AT and RAFTCRON_DEADLINE in ISO-8601 UTC, RAFTCRON_FENCING_TOKEN,
RAFTCRON_ATTEMPT, RAFTCRON_IDEMPOTENCY_KEY, RAFTCRON_PAYLOAD with the payload's JSON text) and
reads the payload's JSON text on stdin. Exit code 0 is success; anything else a failure with
that exit code. The last few KiB of stdout and of stderr are reported apart (each attempt keeps
them: `raftcron logs`), and the last few KiB of both, interleaved as they arrived, as the output
tail older readers show.

A command is the job submitter's, not the worker's: it gets an allow-listed environment (PATH,
HOME, LANG, LC_*, TZ, the names an operator adds with `env_names`, and the run's RAFTCRON_*
variables), never the worker's own (its token, token file, CA, client key), and runs in a fresh
temporary directory, not the worker's working directory. With `user`, a worker running as root
runs it as that user, with that user's primary group and no supplementary groups.
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from worker._context import RunContext

__all__ = ["ShellCommand", "ShellResult", "ShellUser", "command_environment", "shell_environment", "shell_user"]

log = logging.getLogger("raftcron.worker.shell")

DEFAULT_GRACE_S = 5.0
DEFAULT_TAIL_BYTES = 4096
# What a command inherits from the worker's environment, besides LC_* and the operator's additions.
INHERITED_NAMES = ("PATH", "HOME", "LANG", "TZ")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# The run's variables are set by the executor: no RAFTCRON_* name is ever inherited.
RUN_PREFIX = "RAFTCRON_"


@dataclass(frozen=True)
class ShellResult:
    """How a command ended. A handler may return one to report an exit code and output."""

    exit_code: int
    output_tail: str = ""
    # Set when a signal ended the shell (exit_code is then 128 + its number, as in sh).
    signal_name: str | None = None
    # The ends of each stream apart (output_tail interleaves them).
    stdout_tail: str = ""
    stderr_tail: str = ""


def _iso_utc(instant: datetime | None) -> str:
    return "" if instant is None else instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def shell_environment(ctx: RunContext) -> dict[str, str]:
    """The RAFTCRON_* variables a command gets for the run of `ctx`."""
    return {
        "RAFTCRON_JOB_ID": ctx.job_id,
        "RAFTCRON_RUN_KEY": ctx.run_key,
        "RAFTCRON_SCHEDULED_AT": _iso_utc(ctx.scheduled_at),
        "RAFTCRON_FENCING_TOKEN": str(ctx.fencing_token),
        "RAFTCRON_ATTEMPT": str(ctx.attempt),
        "RAFTCRON_DEADLINE": _iso_utc(ctx.deadline),
        "RAFTCRON_IDEMPOTENCY_KEY": ctx.idempotency_key,
        "RAFTCRON_PAYLOAD": ctx.payload_json,
    }


def check_env_names(names: Iterable[str]) -> tuple[str, ...]:
    """Names an operator adds to a command's environment; ValueError for one that may not be."""
    names = tuple(names)
    for name in names:
        if not name or "=" in name or "\0" in name:
            raise ValueError(f"--shell-env {name!r}: not an environment variable name")
        if name.upper().startswith(RUN_PREFIX):
            raise ValueError(
                f"--shell-env {name!r}: RAFTCRON_* variables are the worker's own (its credentials) "
                "or set per run; a command never inherits them"
            )
    return names


def command_environment(
    ctx: RunContext, environ: Mapping[str, str], extra_names: Iterable[str] = (), home: str | None = None
) -> dict[str, str]:
    """The whole environment of a command for the run of `ctx`: allow-listed names of `environ`
    (the worker's), then the run's variables. `home` replaces HOME (a separate user's)."""
    wanted = set(INHERITED_NAMES) | set(check_env_names(extra_names))
    env = {
        name: value
        for name, value in environ.items()
        if (name in wanted or name.startswith("LC_")) and not name.upper().startswith(RUN_PREFIX)
    }
    env.setdefault("PATH", DEFAULT_PATH)
    if home is not None:
        env["HOME"] = home
    return env | shell_environment(ctx)


@dataclass(frozen=True)
class ShellUser:
    """Whom commands run as: a user's ids and home, with no supplementary groups."""

    name: str
    uid: int
    gid: int
    home: str


def shell_user(name: str, euid: int | None = None) -> ShellUser:
    """The user `name` for commands; ValueError unless this process may switch to it (root)."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"--shell-user {name!r}: no such user") from None
    euid = os.geteuid() if euid is None else euid
    if euid != 0 and euid != entry.pw_uid:
        raise ValueError(f"--shell-user {name!r}: the worker must run as root to run commands as another user")
    return ShellUser(name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


class ShellCommand:
    """A handler that runs one shell command line for a run (see the module docstring)."""

    def __init__(
        self,
        command: str,
        *,
        grace_s: float = DEFAULT_GRACE_S,
        tail_bytes: int = DEFAULT_TAIL_BYTES,
        shell: str = "/bin/sh",
        env_names: Iterable[str] = (),
        user: ShellUser | None = None,
    ) -> None:
        if not command.strip():
            raise ValueError("empty shell command")
        self.command = command
        self.grace_s = grace_s
        self.tail_bytes = tail_bytes
        self.shell = shell
        self.env_names = check_env_names(env_names)
        self.user = user

    def __call__(self, ctx: RunContext) -> ShellResult:
        workdir = tempfile.mkdtemp(prefix="raftcron-run-")
        try:
            return self._run(ctx, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _run(self, ctx: RunContext, workdir: str) -> ShellResult:
        user = self.user
        if user is not None:
            os.chown(workdir, user.uid, user.gid)
        process = subprocess.Popen(
            [self.shell, "-c", self.command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, which we can signal as a whole
            env=command_environment(ctx, os.environ, self.env_names, user.home if user else None),
            cwd=workdir,
            close_fds=True,
            user=user.uid if user else None,
            group=user.gid if user else None,
            extra_groups=[] if user else None,  # none of ours: only the user's own group
        )
        group = process.pid  # a new session's leader: its pid is the group id
        both = _Tail(self.tail_bytes)
        out, err = _Tail(self.tail_bytes, both), _Tail(self.tail_bytes, both)
        # Threads, because a large payload would fill the pipe while nobody reads output.
        _start(_feed_stdin, process.stdin, ctx.payload_json.encode("utf-8"))
        readers = (_start(out.read_all, process.stdout), _start(err.read_all, process.stderr))
        exited = threading.Event()
        wake = threading.Event()  # the command exited, or the run was cancelled
        _start(_wait_then_set, process, exited, wake)
        ctx.add_cancel_callback(wake.set)
        wake.wait()
        if not exited.is_set():
            log.info("run %s cancelled (%s): stopping process group %d", ctx.run_key, ctx.cancel_reason, group)
        # Also after a normal exit: the run owns its group, nothing in it may outlive the run.
        stop_process_group(group, self.grace_s, exited.is_set)
        code = process.wait()
        for reader in readers:
            reader.join(timeout=1.0)  # a process that left the group may still hold the pipe
        streams = {"stdout_tail": out.text(), "stderr_tail": err.text()}
        if code < 0:
            name = signal.Signals(-code).name
            return ShellResult(128 - code, both.text(), name, **streams)
        return ShellResult(code, both.text(), **streams)

    def __repr__(self) -> str:
        return f"ShellCommand({self.command!r})"


def stop_process_group(group: int, grace_s: float, leader_gone=lambda: True) -> None:
    """SIGTERM every process of `group`, then SIGKILL what is left after `grace_s`."""
    if not _group_alive(group):
        return
    _signal_group(group, signal.SIGTERM)
    give_up_at = time.monotonic() + grace_s
    while time.monotonic() < give_up_at:
        if leader_gone() and not _group_alive(group):
            return
        time.sleep(0.02)
    log.warning("process group %d ignored SIGTERM for %.1fs: SIGKILL", group, grace_s)
    _signal_group(group, signal.SIGKILL)
    # SIGKILL is delivered asynchronously: wait (briefly) until the processes are really gone,
    # so that a run never ends while pieces of it still execute.
    give_up_at = time.monotonic() + 1.0
    while _group_alive(group) and time.monotonic() < give_up_at:
        time.sleep(0.01)


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass


def _group_alive(group: int) -> bool:
    """True while a process of the group runs; zombies (dead, not yet reaped) do not count."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        entries = None
    if entries is None:  # no procfs: ask the kernel, zombies included
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state, ppid, pgrp, ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == group and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _start(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True, name="raftcron-shell")
    thread.start()
    return thread


def _feed_stdin(stdin, data: bytes) -> None:
    try:
        with stdin:
            stdin.write(data)
    except (BrokenPipeError, OSError):
        pass  # the command does not read its stdin: fine


def _wait_then_set(process: subprocess.Popen, *events: threading.Event) -> None:
    process.wait()
    for event in events:
        event.set()


class _Tail:
    """The last `limit` bytes of what was added. `also` gets the same bytes a whole line at a
    time (the interleaved tail of both streams, in the order their lines were completed): a
    program writes a line in pieces, and two pipes would otherwise splice into each other's."""

    def __init__(self, limit: int, also: _Tail | None = None) -> None:
        self._limit = limit
        self._also = also
        self._buffer = bytearray()
        self._partial = bytearray()  # the start of a line not yet passed to `also`
        self._dropped = False
        self._lock = threading.Lock()

    def read_all(self, pipe) -> None:
        with pipe:
            while chunk := pipe.read1(65536):
                self.add(chunk)
        if self._also is not None and self._partial:
            self._also.add(bytes(self._partial))

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._buffer += chunk
            if len(self._buffer) > self._limit:
                del self._buffer[: len(self._buffer) - self._limit]
                self._dropped = True
        if self._also is None:
            return
        self._partial += chunk
        cut = self._partial.rfind(b"\n") + 1 if len(self._partial) <= self._limit else len(self._partial)
        if cut:
            self._also.add(bytes(self._partial[:cut]))
            del self._partial[:cut]

    def text(self) -> str:
        with self._lock:
            data, dropped = bytes(self._buffer), self._dropped
        if dropped:
            # The cut may fall inside a UTF-8 sequence: drop its continuation bytes.
            while data and 0x80 <= data[0] < 0xC0:
                data = data[1:]
        return data.decode("utf-8", errors="replace")
