"""An SDK worker process for chaos scenarios: `python -m tests.chaos.workerproc --cluster ... --sink URL`.

Its handlers write their effect to the fenced sink with the attempt's fencing token, and
deliberately ignore cancellation while they sleep: a stale attempt that wakes up (after
SIGSTOP/SIGCONT, or past its deadline) still tries to write, and the sink must refuse it.
"""

from __future__ import annotations

import argparse
import logging
import time

from scheduler.rpc.convert import parse_run_key
from tests.chaos import sink
from worker import Worker

log = logging.getLogger("chaos.workerproc")


def _scheduled_us(ctx) -> int:
    return parse_run_key(ctx.run_key)[1]


def _write(ctx, url: str) -> None:
    if not sink.write(url, ctx.job_id, _scheduled_us(ctx), ctx.fencing_token, ctx.worker_id):
        raise RuntimeError(f"sink refused token {ctx.fencing_token}: a newer attempt wrote first")


def handlers(url: str) -> dict:
    def write(ctx):
        """Sleep `sleep_s` in the first `sleep_attempts` attempts (ignoring cancellation), then write."""
        payload = ctx.payload or {}
        if ctx.attempt <= payload.get("sleep_attempts", 1):
            # Scenarios wait for this line: a run the cluster counts as leased may still be in a
            # Lease answer on its way to this worker (and lost with it, if the worker is paused).
            log.info("handler started: %s token %d", ctx.run_key, ctx.fencing_token)
            time.sleep(payload.get("sleep_s", 0))
        _write(ctx, url)

    def hang(ctx):
        """Run far past the deadline, ignoring cancellation, then try to write anyway."""
        time.sleep((ctx.payload or {}).get("hang_s", 30))
        _write(ctx, url)

    return {"chaos.write": write, "chaos.hang": hang}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    Worker(
        args.cluster,
        concurrency=args.concurrency,
        worker_id=args.worker_id,
        handlers=handlers(args.sink),
        lease_wait_s=1.0,
        drain_timeout_s=3.0,
        shell_grace_s=1.0,
        call_timeout_s=2.0,
        complete_retry_s=20.0,
    ).run()


if __name__ == "__main__":
    main()
