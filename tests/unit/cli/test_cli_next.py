"""`raftcron next` and `explain` with L, W and #: fires, words, and one-line errors."""

from __future__ import annotations

import contextlib
import json

import pytest

from scheduler import cli
from scheduler.cli import connection
from worker.api.v1 import common_pb2, jobs_pb2, runs_pb2


def _next(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["next", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_next_lists_last_days_of_the_month_in_berlin_as_json(capsys):
    code, out, _ = _next(
        capsys,
        *("--schedule", "0 0 L * *", "--timezone", "Europe/Berlin", "--after", "2027-01-01T00:00:00Z", "-n", "5"),
        "--json",
    )
    assert code == 0
    assert [fire["at"] for fire in json.loads(out)] == [
        "2027-01-31T00:00:00+01:00",
        "2027-02-28T00:00:00+01:00",
        "2027-03-31T00:00:00+02:00",
        "2027-04-30T00:00:00+02:00",
        "2027-05-31T00:00:00+02:00",
    ]


@pytest.mark.parametrize(
    "schedule, first, words",
    [
        ("0 10 * * 5#3", "2027-01-15T10:00:00+00:00", "on the third Friday of the month"),
        ("0 10 * * fri#3", "2027-01-15T10:00:00+00:00", "on the third Friday of the month"),
        ("0 9 LW * *", "2027-01-29T09:00:00+00:00", "on the last weekday of the month"),
        ("0 9 * * friL", "2027-01-29T09:00:00+00:00", "on the last Friday of the month"),
        ("0 0 0 15W * *", "2027-01-15T00:00:00+00:00", "on the weekday nearest the 15th"),
    ],
)
def test_next_says_in_words_which_days_a_modifier_means(capsys, schedule, first, words):
    code, out, _ = _next(capsys, "--schedule", schedule, "--after", "2027-01-01T00:00:00Z", "-n", "2")
    assert code == 0
    header, first_fire, _ = out.splitlines()
    assert f"in UTC, {words}, fixed-time" in header
    assert first_fire.startswith(first)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--schedule", "0 0 * * *", "--timezone", ""], "invalid timezone: time zone must not be empty"),
        (["--schedule", "0 0 L-31 * *"], "invalid schedule: 'L-31': L-31 is before the first day of every month"),
        (["--schedule", "0 0 * * L"], "Quartz's Saturday"),
        (["--schedule", "0 0 * * 5#6"], "1-5"),
        (["--schedule", "0 0 30W 2 *"], "can never fire"),
    ],
)
def test_next_refuses_bad_input_in_one_line_with_exit_code_2(capsys, argv, message):
    code, out, err = _next(capsys, *argv, "--after", "2027-01-01T00:00:00Z")
    assert code == 2
    assert out == ""
    assert err.startswith("raftcron next: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_next_help_explains_the_modifiers(capsys):
    with pytest.raises(SystemExit):
        cli.main(["next", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for fragment in ("L (last day)", "15W", "LW (last weekday)", "fri#3", "friL", "(default UTC)"):
        assert fragment in text


class OneJobClient:
    def __init__(self, spec: common_pb2.JobSpec) -> None:
        self.spec = spec

    def get_job(self, job_id):
        return jobs_pb2.GetJobResponse(job=common_pb2.Job(spec=self.spec))

    def list_runs(self, request):
        return runs_pb2.ListRunsResponse()


def test_explain_names_the_schedule_in_words(monkeypatch, capsys):
    spec = common_pb2.JobSpec(id="payroll", schedule="0 9 LW * *", timezone="Europe/Berlin")
    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(OneJobClient(spec)))
    assert cli.main(["--cluster", "127.0.0.1:7100", "explain", "payroll", "--at", "2027-01-29T08:00:00Z"]) == 0
    sentence, schedule = capsys.readouterr().out.splitlines()
    assert sentence.startswith("slot 2027-01-29T08:00:00Z of payroll")
    assert schedule.startswith("schedule: cron '0 9 LW * *' in Europe/Berlin, on the last weekday of the month")
    argv = ["--cluster", "127.0.0.1:7100", "explain", "payroll", "--at", "2027-01-29T08:00:00Z", "--json"]
    assert cli.main(argv) == 0
    assert "on the last weekday of the month" in json.loads(capsys.readouterr().out)["schedule"]
