"""A fenced sink: the downstream store a job writes its effect to, as DESIGN.md asks jobs to.

It remembers the highest fencing token written per run key and refuses a write with a
lower one: the write of an attempt whose lease was lost while it kept running. Every
write offered is recorded, accepted or not, in the sink's own order. A tiny HTTP server
on the namespace's loopback; `write()` is what worker handlers call.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.chaos.checker import SinkWrite

# Never through a proxy: the sink lives on the namespace's loopback.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class FencedSink:
    def __init__(self, recorder, host: str = "127.0.0.1") -> None:
        self._recorder = recorder
        self._highest: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._seq = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                accepted = sink.offer(body["job_id"], int(body["scheduled_us"]), int(body["token"]), body["worker"])
                reply = json.dumps({"accepted": accepted}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}/write"
        self._thread = threading.Thread(target=self._server.serve_forever, name="sink", daemon=True)
        self._thread.start()

    def offer(self, job_id: str, scheduled_us: int, token: int, worker: str) -> bool:
        key = (job_id, scheduled_us)
        with self._lock:
            accepted = token >= self._highest.get(key, 0)
            if accepted:
                self._highest[key] = token
            self._seq += 1
            self._recorder.add("sink", SinkWrite(self._seq, job_id, scheduled_us, token, accepted, worker))
        return accepted

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def write(url: str, job_id: str, scheduled_us: int, token: int, worker: str, timeout_s: float = 5.0) -> bool:
    """Offer one write; True when the sink accepted it."""
    body = json.dumps({"job_id": job_id, "scheduled_us": scheduled_us, "token": token, "worker": worker}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with _opener.open(request, timeout=timeout_s) as response:
        return json.loads(response.read())["accepted"]
