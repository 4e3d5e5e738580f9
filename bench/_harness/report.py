"""What every benchmark does around its measurement: the shared options, the JSON report it
starts from (what ran, where, on which code), a timestamped log line, and the ending: JSON
written, failed checks listed, data kept or removed, and the exit status."""

from __future__ import annotations

import argparse
import shutil
import sys
import time

import scheduler
from bench._harness.common import code_revision, machine_info, write_json


def finish_in_process(name: str, report: dict) -> int:
    """`finish` for a benchmark without a cluster: write the JSON, list the failed checks; 1 if any."""
    path = write_json(f"{name}.json", report)
    log(f"wrote {path}")
    for problem in report["problems"]:
        print(f"FAILED: {problem}", file=sys.stderr)
    return 1 if report["problems"] else 0


def finish(name: str, report: dict, root, interrupted: bool, keep: bool) -> int:
    """Write the JSON, list the failed checks, keep the run's data when something went wrong
    (or when asked to), and give the exit status: 130 interrupted, 1 failed, 0 clean."""
    path = write_json(f"{name}.json", report)
    log(f"wrote {path}")
    problems = report["problems"]
    if problems:
        print("\nFAILED checks:", *(f"  - {p}" for p in problems), sep="\n", file=sys.stderr)
    if problems or interrupted or keep:
        log(f"data directories and logs kept under {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 130 if interrupted else (1 if problems else 0)


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def code_info() -> dict:
    return code_revision(scheduler.__file__)


def bench_parser(
    name: str, doc: str, port_base: int | None = None, keep: bool = True, quick_help: str | None = None
) -> argparse.ArgumentParser:
    """The options every benchmark shares: --quick, and for those that start clusters --port-base
    (and --keep); each benchmark adds its own after."""
    parser = argparse.ArgumentParser(prog=f"python -m bench {name}", description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick_help or "smoke mode: smaller and fewer repetitions")
    if port_base is not None:
        parser.add_argument(
            "--port-base", type=int, default=port_base, help=f"first loopback port base (default {port_base})"
        )
    if keep:
        parser.add_argument("--keep", action="store_true", help="keep the data directories (kept anyway on failure)")
    return parser


def new_report(name: str, quick: bool, **fields) -> dict:
    """The JSON report every benchmark starts from: what ran, where, on which code; then its own fields."""
    return {
        "benchmark": name,
        "mode": "quick" if quick else "full",
        "command": f"python -m bench {name}" + (" --quick" if quick else ""),
        "machine": machine_info(),
        "code": code_info(),
        "problems": [],
        **fields,
    }
