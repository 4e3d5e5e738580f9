"""The run page shows each attempt with what it wrote: escaped, long streams collapsed."""

from __future__ import annotations

from scheduler.core import model
from scheduler.core.state import State
from scheduler.dashboard.server import Dashboard
from scheduler.security.principals import READER, SUBMITTER, Principal
from tests.unit.dashboard.test_dashboard_pages import NOW_US, FakeRaftLog, attempt, fake_config, job, run, spec

SLOT_US = NOW_US - 120 * 1_000_000


def _board(*attempts) -> Dashboard:
    state = State(now_us=NOW_US, epoch=3, leader_id="n2", leader_term=7, applied_index=500)
    state.jobs["backup"] = job(spec("backup", target_kind="shell", target="backup.sh"), next_due_us=NOW_US)
    state.add_run(run("backup", SLOT_US, model.SUCCEEDED, attempt=len(attempts), attempts=list(attempts)))
    return Dashboard(FakeRaftLog(state), fake_config())


def _with(a, **fields):
    for name, value in fields.items():
        setattr(a, name, value)
    return a


def test_each_attempt_shows_its_own_streams_and_how_it_ended() -> None:
    first = _with(attempt(1, SLOT_US, "failure", 3, "exit code 3"), stdout_tail="step 1\n", stderr_tail="<b>boom</b>\n")
    second = _with(attempt(2, SLOT_US + 10_000_000), stdout_tail="\n".join(f"line {i}" for i in range(40)))
    board = _board(first, second)
    html = board.render(f"/runs/backup/{SLOT_US}", {})
    assert "<h2>Output per attempt</h2>" in html
    one, two = html.split('id="attempt-1"')[1].split('id="attempt-2"')
    assert "attempt 1: failure, exit code 3" in one and "step 1" in one
    assert "&lt;b&gt;boom&lt;/b&gt;" in one and "<b>boom</b>" not in html  # escaped
    assert '<details class="stream stdout" open>' in one  # short: open
    assert "attempt 2: success, exit code 0" in two and "line 39" in two
    assert '<details class="stream stdout">' in two and "(40 lines)" in two  # long: collapsed
    board.close()


def test_an_attempt_that_raised_shows_its_exception_and_other_owners_see_no_output() -> None:
    raised = _with(attempt(1, SLOT_US, "failure", 0, "KeyError: 'x'"), exception_type="KeyError", stderr_tail="tb")
    board = _board(raised)
    path = f"/runs/backup/{SLOT_US}"
    html = board.render(path, {})
    assert "attempt 1: failure, exception KeyError" in html and "exit code 0" not in html
    for principal in (Principal("ops", SUBMITTER, owners=("ops",)), Principal("grafana", READER)):
        hidden = board.render(path, {}, principal)
        assert "tb</pre>" not in hidden and "hidden: shown to the admin" in hidden
        assert "exception KeyError" in hidden  # how it ended stays visible
    board.close()


def test_a_run_recorded_before_output_per_attempt_keeps_its_output_tail() -> None:
    board = _board(attempt(1, SLOT_US))
    board._raftlog.state.get_run("backup", SLOT_US).output_tail = "old combined tail"
    html = board.render(f"/runs/backup/{SLOT_US}", {})
    assert "<h2>Output tail</h2>" in html and "old combined tail" in html
    board.close()


def test_the_interleaved_tail_shows_when_the_last_attempt_recorded_no_stream() -> None:
    first = _with(attempt(1, SLOT_US, "failure", 3, "exit code 3"), stdout_tail="first try\n")
    board = _board(first, attempt(2, SLOT_US + 10_000_000))
    board._raftlog.state.get_run("backup", SLOT_US).output_tail = "Traceback: only here"
    html = board.render(f"/runs/backup/{SLOT_US}", {})
    assert "first try" in html and "Output tail of the last attempt" in html and "Traceback: only here" in html
    board.close()
