"""Bare gRPC on this machine: unary calls/s and server-stream messages/s, the baseline for execution.

    python -m bench grpc_raw            # 5 repetitions of 4 s per figure, medians
    python -m bench grpc_raw --quick    # 2 repetitions of 2 s

The server is a separate process with a trivial servicer (no protobuf: the bytes are echoed) on
a `grpc.server` with a 16-thread pool, the same server construction a node uses. Clients are
separate processes (each its own GIL), each with several threads calling a blocking unary stub
back to back, or reading one server stream. Payloads are 80 B, about the size of a
`CompleteRequest` or a `LeaseRef`.

The execution benchmark imports `measure_unary` so its ratio is against a figure measured in
the same run.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
import traceback
from concurrent import futures

from bench._harness.common import PortAllocator, fmt, load_average, median, print_table, raise_on_sigterm, write_json
from bench._harness.report import bench_parser, log, new_report

SERVICE = "raftcronbench.Echo"
PAYLOAD = b"x" * 80
SERVER_THREADS = 16  # as in scheduler/node.py
STREAM_MESSAGES = 50_000


# -- the server (child process) -----------------------------------------------------------------
def _server_main(address: str, ready, stop, max_life_s: float) -> None:
    import signal

    import grpc

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def ping(request: bytes, context) -> bytes:
        return request

    def stream(request: bytes, context):
        count = int(request.decode() or "0")
        for _ in range(min(count, 1_000_000)):
            yield PAYLOAD

    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Ping": grpc.unary_unary_rpc_method_handler(ping),
            "Stream": grpc.unary_stream_rpc_method_handler(stream),
        },
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=SERVER_THREADS), options=[("grpc.so_reuseport", 0)]
    )
    server.add_generic_rpc_handlers((handler,))
    if server.add_insecure_port(address) == 0:
        ready.put(f"cannot bind {address}")
        return
    server.start()
    ready.put("ok")
    stop.wait(max_life_s)
    server.stop(1).wait()


class EchoServer:
    """A trivial gRPC server in its own process; always stop() it (a finally block)."""

    def __init__(self, address: str, max_life_s: float = 900.0) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.address = address
        self._ready = ctx.Queue()
        self._stop = ctx.Event()
        self._process = ctx.Process(
            target=_server_main, args=(address, self._ready, self._stop, max_life_s), daemon=True, name="grpc-echo"
        )

    def start(self) -> None:
        self._process.start()
        answer = self._ready.get(timeout=30)
        if answer != "ok":
            raise RuntimeError(answer)

    def stop(self) -> None:
        self._stop.set()
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)


# -- the clients (child processes) --------------------------------------------------------------
def _unary_client(address: str, threads: int, duration_s: float, max_calls: int, start_at: float, results) -> None:
    import threading

    import grpc

    channel = grpc.insecure_channel(address)
    ping = channel.unary_unary(f"/{SERVICE}/Ping")
    ping(PAYLOAD, timeout=10)  # connect before the clock starts
    counts = [0] * threads
    errors = [0] * threads

    def loop(i: int) -> None:
        while time.time() < start_at:
            time.sleep(0.001)
        stop_at = start_at + duration_s
        n = 0
        while n < max_calls and time.time() < stop_at:
            try:
                ping(PAYLOAD, timeout=10)
                n += 1
            except grpc.RpcError:
                errors[i] += 1
        counts[i] = n

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    results.put((sum(counts), sum(errors)))
    channel.close()


def _stream_client(address: str, messages: int, start_at: float, results) -> None:
    import grpc

    channel = grpc.insecure_channel(address)
    stream = channel.unary_stream(f"/{SERVICE}/Stream")
    for _ in stream(b"10", timeout=10):
        pass
    while time.time() < start_at:
        time.sleep(0.001)
    t0 = time.time()
    n = 0
    for _ in stream(str(messages).encode(), timeout=120):
        n += 1
    results.put((n, time.time() - t0))
    channel.close()


def measure_unary(address: str, processes: int, threads: int, duration_s: float) -> dict:
    """Unary calls/s of `processes` x `threads` blocking callers for `duration_s`."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    start_at = time.time() + 1.5 + 0.3 * processes  # every process imported grpc and connected
    procs = [
        ctx.Process(target=_unary_client, args=(address, threads, duration_s, 10_000_000, start_at, results), daemon=True)
        for _ in range(processes)
    ]
    try:
        for p in procs:
            p.start()
        got = [results.get(timeout=duration_s + 60) for _ in procs]
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    calls = sum(c for c, _ in got)
    return {"calls": calls, "errors": sum(e for _, e in got), "per_s": calls / duration_s}


def measure_stream(address: str, processes: int, messages: int) -> dict:
    """Server-stream messages/s: `processes` clients each read one stream of `messages`."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    start_at = time.time() + 1.5 + 0.3 * processes
    procs = [ctx.Process(target=_stream_client, args=(address, messages, start_at, results), daemon=True) for _ in range(processes)]
    try:
        for p in procs:
            p.start()
        got = [results.get(timeout=180) for _ in procs]
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    total = sum(n for n, _ in got)
    longest = max(t for _, t in got)
    return {"messages": total, "per_s": total / longest}


def run(port: int, reps: int, duration_s: float, configs: list[tuple[int, int]], stream_procs: list[int],
        stream_messages: int) -> dict:
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
        rows.append([f"unary calls/s ({procs} client procs x {threads} threads)", median(values),
                     " ".join(fmt(v) for v in values)])
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
        report["result"] = run(port, reps, duration_s, [(1, 8), (4, 16)], [1, 4],
                               STREAM_MESSAGES if not args.quick else 20_000)
    except KeyboardInterrupt:
        interrupted = True
        report["result"] = {"unary": {}, "stream": {}, "problems": ["interrupted"]}
    rows = rows_of(report["result"])
    report["table"] = print_table(["figure", "median", "runs"], rows,
                                  title=f"grpc_raw: trivial servicer on 127.0.0.1, {SERVER_THREADS} server threads, median of {reps}")
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
