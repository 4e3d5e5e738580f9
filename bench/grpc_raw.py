"""Bare gRPC on this machine: unary calls/s and server-stream messages/s, the baseline for execution.

    python -m bench grpc_raw            # 5 repetitions of 4 s per figure, medians
    python -m bench grpc_raw --quick    # 2 repetitions of 2 s

The server is a separate process with a trivial servicer (no protobuf: the bytes are echoed) on
a `grpc.server` with a 16-thread pool, the same server construction a node uses. Clients are
separate processes (each its own GIL), each with several threads calling a blocking unary stub
back to back, or reading one server stream. Payloads are 80 B, about the size of a
`CompleteRequest` or a `LeaseRef`. The server and clients are in `bench._harness.grpc_echo`,
which the execution benchmark also uses, so its ratio is against a figure measured in the same
run.
"""

from __future__ import annotations

import sys
import traceback

from bench._harness.common import PortAllocator, fmt, load_average, median, print_table, raise_on_sigterm, write_json
from bench._harness.grpc_echo import SERVER_THREADS, EchoServer, measure_stream, measure_unary
from bench._harness.report import bench_parser, log, new_report

STREAM_MESSAGES = 50_000


def run(
    port: int,
    reps: int,
    duration_s: float,
    configs: list[tuple[int, int]],
    stream_procs: list[int],
    stream_messages: int,
) -> dict:
    address = f"127.0.0.1:{port}"
    out: dict = {"address": address, "unary": {}, "stream": {}, "problems": [], "load_before": load_average()}
    server = EchoServer(address)
    try:
        server.start()
        for rep in range(reps):
            for procs, threads in configs:
                r = measure_unary(address, procs, threads, duration_s)
                out["unary"].setdefault(f"{procs}x{threads}", []).append(r)
                log(f"grpc_raw rep {rep + 1}: unary {procs} procs x {threads} threads: {fmt(r['per_s'])} calls/s")
                if r["errors"]:
                    out["problems"].append(f"unary {procs}x{threads}: {r['errors']} failed calls")
            for procs in stream_procs:
                r = measure_stream(address, procs, stream_messages)
                out["stream"].setdefault(str(procs), []).append(r)
                log(f"grpc_raw rep {rep + 1}: stream x{procs}: {fmt(r['per_s'])} messages/s")
    except Exception as exc:
        out["problems"].append(f"grpc_raw failed: {exc!r}")
        log(traceback.format_exc())
    finally:
        server.stop()
    out["load_after"] = load_average()
    return out


def rows_of(result: dict) -> list[list]:
    rows = []
    for key, reps in result["unary"].items():
        procs, threads = key.split("x")
        values = [r["per_s"] for r in reps]
        rows.append(
            [
                f"unary calls/s ({procs} client procs x {threads} threads)",
                median(values),
                " ".join(fmt(v) for v in values),
            ]
        )
    for key, reps in result["stream"].items():
        values = [r["per_s"] for r in reps]
        rows.append([f"server-stream messages/s ({key} stream(s))", median(values), " ".join(fmt(v) for v in values)])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("grpc_raw", __doc__, port_base=7950, keep=False, quick_help="2 repetitions of 2 s")
    parser.add_argument("--reps", type=int)
    parser.add_argument("--duration", type=float, help="seconds per unary measurement (4; 2 with --quick)")
    args = parser.parse_args(argv)
    reps = args.reps or (2 if args.quick else 5)
    duration_s = args.duration or (2.0 if args.quick else 4.0)
    raise_on_sigterm()
    port = PortAllocator(args.port_base, step=1, limit=40).take(lambda b: [b])
    report = new_report("grpc_raw", args.quick)
    interrupted = False
    try:
        report["result"] = run(
            port, reps, duration_s, [(1, 8), (4, 16)], [1, 4], STREAM_MESSAGES if not args.quick else 20_000
        )
    except KeyboardInterrupt:
        interrupted = True
        report["result"] = {"unary": {}, "stream": {}, "problems": ["interrupted"]}
    rows = rows_of(report["result"])
    report["table"] = print_table(
        ["figure", "median", "runs"],
        rows,
        title=f"grpc_raw: trivial servicer on 127.0.0.1, {SERVER_THREADS} server threads, median of {reps}",
    )
    report["summary"] = {row[0]: row[1] for row in rows}
    problems = report["result"]["problems"]
    report["problems"] = problems
    path = write_json("grpc_raw.json", report)
    log(f"wrote {path}")
    if problems:
        print("\nFAILED checks:", *(f"  - {p}" for p in problems), sep="\n", file=sys.stderr)
    return 130 if interrupted else (1 if problems else 0)


if __name__ == "__main__":
    sys.exit(main())
