"""Client threads that load the cluster during a scenario and record what they were told.

RawWorker speaks WorkerService directly (not the SDK) so every grant, heartbeat answer and
completion answer is observed; some of its leases are abandoned or completed late on
purpose, so stale tokens reach the cluster. TriggerWriter and ApplyWriter make client writes
with request ids and retry them with the same id until acknowledged. All loops are bounded
in time; every call has a timeout.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import traceback

import grpc

from scheduler.rpc.convert import timestamp_us
from tests.chaos.checker import AckedWrite, Answer, Grant
from tests.chaos.harness import now_us
from worker import ClusterClient
from worker.api.v1 import worker_pb2 as wpb

OUTCOMES = {wpb.OK: "ok", wpb.FENCED: "fenced", wpb.NOT_FOUND: "not_found", wpb.RUN_CANCELLED: "cancelled"}
KINDS = {"success": wpb.SUCCESS, "failure": wpb.FAILURE}
MAX_LIFETIME_S = 600.0


class ClientThread(threading.Thread):
    """A load thread; a crash in it is recorded as a failed expectation, never lost."""

    def __init__(self, name: str, recorder) -> None:
        super().__init__(name=name, daemon=True)
        self.recorder = recorder
        self._stopping = threading.Event()
        self._born = time.monotonic()

    def run(self) -> None:
        try:
            self.body()
        except Exception:  # noqa: BLE001
            self.recorder.expect(f"{self.name} ran without error", False, traceback.format_exc()[-2000:])

    def body(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set() or time.monotonic() - self._born > MAX_LIFETIME_S


class RawWorker(ClientThread):
    """Leases runs of `targets`, heartbeats them every ttl/3, completes them after `hold_s`.

    A share `p_abandon` of leases is dropped silently (the reaper must expire it), a share
    `p_late` is completed without heartbeats after 1.5 TTL (usually answered FENCED).
    """

    def __init__(
        self,
        addresses,
        worker_id: str,
        recorder,
        rng,
        targets=("raw",),
        max_held: int = 20,
        hold_s: tuple[float, float] = (0.05, 1.0),
        p_abandon: float = 0.05,
        p_late: float = 0.05,
        p_fail: float = 0.05,
        ttl_s: float = 2.0,
    ) -> None:
        super().__init__(f"raw-{worker_id}", recorder)
        self.client = ClusterClient(list(addresses), timeout_s=2.0)
        self.worker_id = worker_id
        self.rng = rng
        self.targets = list(targets)
        self.max_held = max_held
        self.hold_s = hold_s
        self.p_abandon, self.p_late, self.p_fail = p_abandon, p_late, p_fail
        self.ttl_s = ttl_s
        self.held: dict[tuple[str, int, int], wpb.LeaseRef] = {}
        self._actions: list[tuple[float, int, str, tuple]] = []  # (when, tiebreak, what, key)
        self._order = itertools.count()

    def body(self) -> None:
        try:
            while not self.stopping:
                self._do_due_actions()
                if len(self.held) < self.max_held:
                    self._lease()
                else:
                    self._stopping.wait(0.05)
        finally:
            self.client.close()

    def _schedule(self, delay_s: float, what: str, key: tuple) -> None:
        heapq.heappush(self._actions, (time.monotonic() + delay_s, next(self._order), what, key))

    def _lease(self) -> None:
        request = wpb.LeaseRequest(
            worker_id=self.worker_id, targets=self.targets, max_runs=self.max_held - len(self.held)
        )
        request.wait.FromMilliseconds(300)
        try:
            response = self.client.lease(request, timeout_s=3.0)
        except grpc.RpcError:
            self.recorder.count("lease_errors")
            self._stopping.wait(0.1)
            return
        received_us = now_us()
        for grant in response.leases:
            ref = wpb.LeaseRef(job_id=grant.job_id, scheduled_at=grant.scheduled_at, fencing_token=grant.fencing_token)
            key = (grant.job_id, timestamp_us(grant.scheduled_at), grant.fencing_token)
            self.recorder.add("grants", Grant(key[0], key[1], key[2], self.worker_id, received_us))
            self.recorder.count("grants")
            roll = self.rng.random()
            if roll < self.p_abandon:
                self.recorder.count("abandoned")
                continue
            self.held[key] = ref
            if roll < self.p_abandon + self.p_late:
                self._schedule(self.ttl_s * 1.5, "late", key)
            else:
                self._schedule(self.rng.uniform(*self.hold_s), "complete", key)
                self._schedule(self.ttl_s / 3, "beat", key)

    def _do_due_actions(self) -> None:
        beats = []
        while self._actions and self._actions[0][0] <= time.monotonic() and not self._stopping.is_set():
            _, _, what, key = heapq.heappop(self._actions)
            if key not in self.held:
                continue
            if what == "beat":
                beats.append(key)
            else:
                kind = "failure" if self.rng.random() < self.p_fail else "success"
                self._complete(key, kind)
        beats = [key for key in beats if key in self.held]  # completed meanwhile: not beaten
        if beats:
            self._heartbeat(beats)

    def _heartbeat(self, keys: list[tuple]) -> None:
        sent_us = now_us()
        try:
            response = self.client.heartbeat(
                worker_id=self.worker_id, leases=[self.held[k] for k in keys], timeout_s=2.0
            )
        except grpc.RpcError:
            self.recorder.count("heartbeat_errors")
            for key in keys:
                self._schedule(0.2, "beat", key)
            return
        for key, result in zip(keys, response.results):
            outcome = OUTCOMES.get(result.outcome, "unknown")
            self.recorder.add("answers", Answer("heartbeat", key[0], key[1], key[2], outcome, sent_us))
            if outcome == "ok":
                self._schedule(self.ttl_s / 3, "beat", key)
            else:
                self.held.pop(key, None)  # no longer ours

    def _complete(self, key: tuple, kind: str) -> None:
        ref = self.held.pop(key)
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline and not self._stopping.is_set():
            sent_us = now_us()
            try:
                response = self.client.complete(worker_id=self.worker_id, lease=ref, kind=KINDS[kind], timeout_s=2.0)
            except grpc.RpcError:
                self.recorder.count("complete_errors")
                self._stopping.wait(0.2)
                continue  # same token: a repeat of a completion that did commit is answered as before
            outcome = OUTCOMES.get(response.outcome, "unknown")
            self.recorder.add("answers", Answer("complete", key[0], key[1], key[2], outcome, sent_us, kind))
            self.recorder.count(f"complete_{outcome}")
            return


class _Writer(ClientThread):
    """Issues `count` writes from `threads` threads; each retried with its request id until acked."""

    def __init__(self, name: str, addresses, recorder, count: int, threads: int = 4, give_up_s: float = 30.0) -> None:
        super().__init__(name, recorder)
        self.addresses = list(addresses)
        self.count = count
        self.threads = threads
        self.give_up_s = give_up_s
        self.acked = 0
        self.sent = 0
        self.unknown = 0
        self._next = itertools.count()
        self._lock = threading.Lock()

    def body(self) -> None:
        pool = [threading.Thread(target=self._loop, daemon=True) for _ in range(self.threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()

    def _loop(self) -> None:
        try:
            self._write_all()
        except grpc.RpcError as error:  # a refusal (a job gone, say): its status tells it all
            self.recorder.expect(f"{self.name} ran without error", False, f"{error.code().name}: {error.details()}")
        except Exception:  # noqa: BLE001
            self.recorder.expect(f"{self.name} ran without error", False, traceback.format_exc()[-2000:])

    def _write_all(self) -> None:
        with ClusterClient(self.addresses, timeout_s=3.0) as client:
            while not self.stopping:
                with self._lock:
                    i = next(self._next)
                if i >= self.count:
                    return
                self._write_until_acked(client, i)

    def _write_until_acked(self, client, i: int) -> None:
        give_up = time.monotonic() + self.give_up_s
        with self._lock:
            self.sent += 1
        while not self._stopping.is_set() and time.monotonic() < give_up:
            try:
                self.write(client, i)
            except grpc.RpcError as error:
                if error.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND):
                    raise
                self._stopping.wait(0.2)
                continue
            with self._lock:
                self.acked += 1
            return
        with self._lock:
            self.unknown += 1

    def write(self, client, i: int) -> None:
        raise NotImplementedError


class TriggerWriter(_Writer):
    """Manual runs of `job_id`, one log entry each: TriggerJob with request id and author `prefix`+i."""

    def __init__(self, addresses, recorder, job_id: str, prefix: str, count: int, **kwargs) -> None:
        super().__init__(f"trigger-{prefix}", addresses, recorder, count, **kwargs)
        self.job_id = job_id
        self.prefix = prefix

    def write(self, client, i: int) -> None:
        tag = f"{self.prefix}{i}"
        response = client.trigger_job(job_id=self.job_id, author=tag, request_id=tag)
        self.recorder.add("acked", AckedWrite("run", self.job_id, timestamp_us(response.run.scheduled_at), request=tag))


class ApplyWriter(_Writer):
    """New jobs that never fire in the test's lifetime, one ApplyJobs with a request id each."""

    def __init__(self, addresses, recorder, prefix: str, count: int, spec_for, **kwargs) -> None:
        super().__init__(f"apply-{prefix}", addresses, recorder, count, **kwargs)
        self.prefix = prefix
        self.spec_for = spec_for  # i -> proto JobSpec
        self.specs: list = []

    def write(self, client, i: int) -> None:
        spec = self.spec_for(i)
        with self._lock:
            if spec not in self.specs:
                self.specs.append(spec)
        response = client.apply_jobs(jobs=[spec], author="chaos", request_id=f"{self.prefix}{i}")
        for change in response.changes:
            self.recorder.add("acked", AckedWrite("job", change.job_id, version=change.version))
