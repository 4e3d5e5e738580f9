"""The `raftcron` command line: `parser` builds and runs it; a module per group of commands does the work."""

import sys

from scheduler.cli.shadowing import shadowing_worker

if (_shadow := shadowing_worker()) is not None:
    # Found before anything imports it: importing a user's worker.py would run it.
    print(f"raftcron: {_shadow}", file=sys.stderr)
    raise SystemExit(2)

try:
    from scheduler.cli.parser import main
except ModuleNotFoundError as missing:
    # An install without the `server` extra holds the worker SDK's dependencies only: say so in
    # one line instead of a traceback. A module of raftcron's own missing is a bug: raise it.
    if (missing.name or "").partition(".")[0] in ("scheduler", "worker"):
        raise
    print(
        f"raftcron: the server needs `pip install 'raftcron[server]'` (no module named {missing.name!r}); "
        "workers run without it as `python -m worker.cli`",
        file=sys.stderr,
    )
    raise SystemExit(2) from None

__all__ = ["main"]
