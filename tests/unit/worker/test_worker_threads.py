"""The worker's reused attempt threads and its single deadline watcher."""

from __future__ import annotations

import threading
import time

from worker._threads import DeadlineWatcher, HandlerThreads

WAIT_S = 10.0


def wait_until(predicate, timeout_s: float = WAIT_S) -> bool:
    stop_at = time.monotonic() + timeout_s
    while time.monotonic() < stop_at:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def threads_named(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def test_calls_one_after_another_reuse_one_thread() -> None:
    pool = HandlerThreads(name="t-reuse")
    seen: list[int] = []
    for _ in range(50):
        done = threading.Event()
        pool.submit(lambda done=done: (seen.append(threading.get_ident()), done.set()))
        assert done.wait(WAIT_S)
        assert wait_until(lambda: pool.idle == 1)  # back waiting before the next call
    assert len(set(seen)) == 1
    assert len(threads_named("t-reuse")) == 1
    assert all(t.daemon for t in threads_named("t-reuse"))


def test_calls_at_once_each_get_a_thread() -> None:
    pool = HandlerThreads(name="t-wide")
    release = threading.Event()
    started = threading.Semaphore(0)
    idents: set[int] = set()

    def call() -> None:
        idents.add(threading.get_ident())
        started.release()
        release.wait(WAIT_S)

    for _ in range(8):
        pool.submit(call)
    for _ in range(8):
        assert started.acquire(timeout=WAIT_S)  # all 8 run at once: none waits for another
    release.set()
    assert len(idents) == 8
    assert wait_until(lambda: pool.idle == 8)


def test_idle_threads_end_and_new_calls_still_run() -> None:
    pool = HandlerThreads(name="t-idle", idle_exit_s=0.05)
    done = threading.Event()
    pool.submit(done.set)
    assert done.wait(WAIT_S)
    assert wait_until(lambda: not threads_named("t-idle"))
    assert pool.idle == 0
    again = threading.Event()
    pool.submit(again.set)
    assert again.wait(WAIT_S)


def test_a_failing_call_does_not_end_its_thread() -> None:
    pool = HandlerThreads(name="t-fail")
    pool.submit(lambda: 1 / 0)
    assert wait_until(lambda: pool.idle == 1)
    done = threading.Event()
    pool.submit(done.set)
    assert done.wait(WAIT_S)
    assert len(threads_named("t-fail")) == 1


def test_deadlines_fire_in_order_and_cancelled_ones_never() -> None:
    watcher = DeadlineWatcher(name="d-order")
    fired: list[str] = []
    all_fired = threading.Event()

    def record(name: str) -> None:
        fired.append(name)
        if len(fired) == 3:
            all_fired.set()

    watcher.arm(0.20, lambda: record("late"))
    off = watcher.arm(0.05, lambda: record("cancelled"))
    watcher.arm(0.10, lambda: record("middle"))
    watcher.arm(-1.0, lambda: record("already due"))
    off.cancel()
    assert all_fired.wait(WAIT_S)
    assert fired == ["already due", "middle", "late"]
    assert watcher.pending() == 0


def test_an_earlier_deadline_armed_later_wakes_the_watcher() -> None:
    watcher = DeadlineWatcher(name="d-wake")
    early = threading.Event()
    far = watcher.arm(3600.0, lambda: None)  # the watcher now sleeps for an hour
    armed_at = time.monotonic()
    watcher.arm(0.05, early.set)
    assert early.wait(WAIT_S)
    assert time.monotonic() - armed_at < 3600.0  # not at the hour: the new deadline woke it
    far.cancel()


def test_cancelled_deadlines_do_not_pile_up() -> None:
    """Attempts mostly end long before their deadline; the watcher must not keep them all."""
    watcher = DeadlineWatcher(name="d-sweep")
    keep = [watcher.arm(3600.0, lambda: None) for _ in range(10)]
    for _ in range(10_000):
        watcher.arm(3600.0, lambda: None).cancel()
    assert watcher.pending() == 10
    assert watcher.held() <= 2 * 10 + 65
    for deadline in keep:
        deadline.cancel()
    assert watcher.pending() == 0


def test_cancel_after_firing_and_a_failing_action_are_harmless() -> None:
    watcher = DeadlineWatcher(name="d-fail")
    first = watcher.arm(0.0, lambda: 1 / 0)
    second_fired = threading.Event()
    watcher.arm(0.01, second_fired.set)
    assert second_fired.wait(WAIT_S)  # the failing action did not end the watcher
    first.cancel()  # already called: nothing to call off
    assert watcher.pending() == 0 and watcher.held() == 0


def test_each_call_starts_with_an_empty_context() -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("attempt", default="unset")
    pool = HandlerThreads(name="t-context")
    seen: list[str] = []
    for value in ("first", "second"):
        done = threading.Event()

        def call(value: str = value, done: threading.Event = done) -> None:
            seen.append(var.get())
            var.set(value)
            done.set()

        pool.submit(call)
        assert done.wait(WAIT_S)
        assert wait_until(lambda: pool.idle == 1)
    assert seen == ["unset", "unset"]  # the second attempt did not see the first one's value
    assert len(threads_named("t-context")) == 1  # and it ran on the same thread
