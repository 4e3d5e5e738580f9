"""Where a node's CPU goes per job of an ApplyJobs call, stage by stage, in one process (no
cluster): the work of the node the client calls, which bounds how fast a million jobs apply.

    python -m bench apply_path            # 20,000 jobs of the realistic mix, best of 7
    python -m bench apply_path --quick    # 4,000 jobs, best of 3

The jobs are `bench scale`'s realistic mix, sent in requests of 2,000 as the scale benchmark
sends them. Each stage is timed in CPU time of the thread (this machine is noisy; CPU time and
the best repetition are the steadiest figures), in the order a node runs them: parsing the
request (the baseline: protobuf's C parser, the least any node can do with the bytes), the wire
checks of every field, the conversion to core records, validation, planning each job's first
slot, the log format the command needs, encoding, and then what every replica does: decoding
and applying it. Output: bench/out/apply_path.json.
"""

from __future__ import annotations

import sys
import time

from bench._harness.common import print_table
from bench._harness.report import bench_parser, finish_in_process, log, new_report
from bench.scale import realistic_specs
from scheduler.core.apply import apply
from scheduler.core.codec import decode_command, encode_command
from scheduler.core.state import State
from scheduler.replication.upgrades import proposal_log_format
from scheduler.rpc.convert import spec_from_pb, spec_to_pb
from scheduler.rpc.jobs import _canonical_payload
from scheduler.rpc.request_checks import request_problems
from scheduler.specs.apply_plan import apply_problems, plan_apply
from worker.api.v1 import jobs_pb2

JOBS_PER_REQUEST = 2_000
STAGES = ("parse", "wire checks", "convert", "validate", "plan", "log format", "encode", "decode", "apply")


def measure(requests: list[bytes], n: int) -> dict[str, float]:
    """CPU microseconds per job of each stage, over every request into one fresh state."""
    spent = dict.fromkeys(STAGES, 0.0)
    state = State()
    clock = time.thread_time
    for index, raw in enumerate(requests, start=1):
        t0 = clock()
        request = jobs_pb2.ApplyJobsRequest.FromString(raw)
        t1 = clock()
        problems = request_problems(request)
        t2 = clock()
        specs = [_canonical_payload(spec_from_pb(job)) for job in request.jobs]
        t3 = clock()
        problems += apply_problems(specs, [])
        t4 = clock()
        command = plan_apply(state, specs, [], prune=False, caller=None, author="bench", request_id=request.request_id)
        t5 = clock()
        proposal_log_format(command)
        t6 = clock()
        data = encode_command(command)
        t7 = clock()
        decoded = decode_command(data)
        t8 = clock()
        result = apply(state, decoded, index)
        t9 = clock()
        if problems or not result.accepted:
            raise RuntimeError(f"the mix was refused: {problems[:3] or result.rejection}")
        for stage, took in zip(
            STAGES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6, t8 - t7, t9 - t8)
        ):
            spent[stage] += took
    return {stage: seconds / n * 1e6 for stage, seconds in spent.items()}


def main(argv: list[str]) -> int:
    parser = bench_parser("apply_path", __doc__, keep=False)
    parser.add_argument("--jobs", type=int, help="jobs (20,000; 4,000 with --quick)")
    parser.add_argument("--reps", type=int, help="repetitions, the best kept (7; 3 with --quick)")
    args = parser.parse_args(argv)
    n = args.jobs or (4_000 if args.quick else 20_000)
    reps = args.reps or (3 if args.quick else 7)
    report = new_report("apply_path", args.quick, jobs=n, reps=reps)
    specs = realistic_specs(n)
    requests = [
        jobs_pb2.ApplyJobsRequest(
            jobs=[spec_to_pb(s) for s in specs[first : first + JOBS_PER_REQUEST]],
            author="bench",
            request_id=f"r{first}",
        ).SerializeToString()
        for first in range(0, n, JOBS_PER_REQUEST)
    ]
    runs = []
    for rep in range(1, reps + 1):
        runs.append(measure(requests, n))
        log(f"rep {rep}: {sum(runs[-1].values()):.1f} us a job")
    best = {stage: min(run[stage] for run in runs) for stage in STAGES}
    total = min(sum(run.values()) for run in runs)
    report.update(us_per_job=best, total_us_per_job=total, runs=runs)
    baseline = best["parse"]
    rows = [[stage, f"{best[stage]:.2f}", f"{best[stage] / baseline:.1f}x"] for stage in STAGES]
    rows.append(["all stages", f"{total:.2f}", f"{total / baseline:.1f}x"])
    print_table(
        ["stage", "CPU us a job", "vs parsing the request"],
        rows,
        title=f"apply_path: {n:,} jobs of the realistic mix in requests of {JOBS_PER_REQUEST:,}, best of {reps}",
    )
    return finish_in_process("apply_path", report)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
