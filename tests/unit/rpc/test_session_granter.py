"""A session's granter against fakes: what it pushes, and what it does with runs granted after
the worker went."""

from __future__ import annotations

import threading

from google.protobuf.timestamp_pb2 import Timestamp

from scheduler.leader.dispatch import NotLeading
from scheduler.rpc.worker_session import _END, _Session
from worker.api.v1 import worker_pb2 as wpb


class FakeContext:
    def __init__(self) -> None:
        self.trailing = ()

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def set_trailing_metadata(self, metadata) -> None:
        self.trailing = metadata


class FakeRegistry:
    def leased(self, *args) -> None:
        pass


class FakeServicer:
    registry = FakeRegistry()

    def __init__(self) -> None:
        self.completed: list[wpb.CompleteManyRequest] = []

    def grants_to_pb(self, granted) -> wpb.LeaseResponse:
        return wpb.LeaseResponse(leases=granted)

    def CompleteMany(self, request, context):
        self.completed.append(request)
        return wpb.CompleteManyResponse()

    def leader_address(self) -> str:
        return "10.0.0.2:7100"


def grant(token: int) -> wpb.LeaseGrant:
    return wpb.LeaseGrant(job_id=f"j{token}", scheduled_at=Timestamp(seconds=token), fencing_token=token)


class FakeDispatcher:
    """Grants `grants` once, calling `during` first; then raises NotLeading (the epoch ended)."""

    def __init__(self, grants, during=lambda: None) -> None:
        self.grants, self.during = grants, during
        self.asked: list[int] = []

    def lease(self, holder, targets, max_runs, wait_s):
        self.asked.append(max_runs)
        if not self.grants:
            raise NotLeading("deposed")
        self.during()
        granted, self.grants = self.grants[:max_runs], []
        return granted


def session_with(dispatcher, credits: int) -> tuple[_Session, FakeServicer, FakeContext]:
    servicer, context = FakeServicer(), FakeContext()
    session = _Session(servicer, dispatcher, context)
    session.open = wpb.SessionOpen(worker_id="w1", targets=["t"])
    session.holder = "w1"
    session.credits.add(credits)
    return session, servicer, context


def drain(session: _Session) -> list:
    messages = []
    while (message := session.outbox.get(timeout=5)) is not _END:
        messages.append(message)
    return messages


def test_the_granter_asks_for_the_credits_and_ends_the_session_naming_the_leader_when_deposed():
    dispatcher = FakeDispatcher([grant(1), grant(2), grant(3)])
    session, servicer, context = session_with(dispatcher, 2)
    thread = threading.Thread(target=session.grant, args=(["t"],))
    thread.start()
    pushed = session.outbox.get(timeout=5)
    assert dispatcher.asked == [2] and len(pushed.grants.leases) == 2
    with session.lock:
        session.credits.add(1)  # a slot freed: the next lease finds the epoch over
    session.wake.set()
    assert drain(session) == []
    thread.join(5)
    assert dispatcher.asked == [2, 1]
    assert session.ending is not None and "deposed" in session.ending[1]
    assert dict(context.trailing) == {"raftcron-leader": "10.0.0.2:7100"}
    assert servicer.completed == []


def test_runs_granted_after_the_worker_went_are_handed_back_at_once():
    session_box: list[_Session] = []
    dispatcher = FakeDispatcher([grant(7)], during=lambda: session_box[0].end())
    session, servicer, _ = session_with(dispatcher, 1)
    session_box.append(session)
    session.grant(["t"])  # returns: the session ended
    assert drain(session) == []  # nothing pushed to a worker that is gone
    (handed_back,) = servicer.completed
    (completion,) = handed_back.completions
    assert completion.lease.fencing_token == 7 and completion.kind == wpb.RETRY_LATER
    assert completion.HasField("retry_after") and completion.retry_after.ToNanoseconds() == 0
