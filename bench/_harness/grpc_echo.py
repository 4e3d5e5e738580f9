"""A trivial gRPC server and blocking clients, each in its own process: bare gRPC on this machine.

The server echoes raw bytes (no protobuf) on a `grpc.server` with a 16-thread pool, the same
server construction a node uses. Clients are separate processes (each its own GIL), each with
several threads calling a blocking unary stub back to back, or reading one server stream.
Payloads are 80 B, about the size of a `CompleteRequest` or a `LeaseRef`. `grpc_raw` reports
these figures; `execution` measures `measure_unary` in its own run as its ratio's denominator.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent import futures

SERVICE = "raftcronbench.Echo"
PAYLOAD = b"x" * 80
SERVER_THREADS = 16  # as in scheduler/node.py


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
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=SERVER_THREADS), options=[("grpc.so_reuseport", 0)])
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


def _gather(procs: list, results, timeout_s: float) -> list:
    """Start the client processes and take one result from each; none outlives the call."""
    try:
        for p in procs:
            p.start()
        return [results.get(timeout=timeout_s) for _ in procs]
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()


def measure_unary(address: str, processes: int, threads: int, duration_s: float) -> dict:
    """Unary calls/s of `processes` x `threads` blocking callers for `duration_s`."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    start_at = time.time() + 1.5 + 0.3 * processes  # every process imported grpc and connected
    procs = [
        ctx.Process(
            target=_unary_client, args=(address, threads, duration_s, 10_000_000, start_at, results), daemon=True
        )
        for _ in range(processes)
    ]
    got = _gather(procs, results, duration_s + 60)
    calls = sum(c for c, _ in got)
    return {"calls": calls, "errors": sum(e for _, e in got), "per_s": calls / duration_s}


def measure_stream(address: str, processes: int, messages: int) -> dict:
    """Server-stream messages/s: `processes` clients each read one stream of `messages`."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    start_at = time.time() + 1.5 + 0.3 * processes
    procs = [
        ctx.Process(target=_stream_client, args=(address, messages, start_at, results), daemon=True)
        for _ in range(processes)
    ]
    got = _gather(procs, results, 180)
    total = sum(n for n, _ in got)
    longest = max(t for _, t in got)
    return {"messages": total, "per_s": total / longest}
