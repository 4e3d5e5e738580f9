"""A spec's policies arrive by the million and repeat: each distinct one is converted and checked
once, and the shortcuts taken for it change no answer (rpc/convert.py, specs/rules.py,
rpc/request_checks.py)."""

from __future__ import annotations

import math

import pytest
from google.protobuf.duration_pb2 import Duration

from scheduler.core import model
from scheduler.rpc import convert
from scheduler.rpc.convert import spec_from_pb
from scheduler.rpc.request_checks import request_problems
from scheduler.specs import rules, validate_spec
from worker.api.v1 import common_pb2 as pb
from worker.api.v1 import jobs_pb2


def pb_spec(job_id: str = "a", **fields) -> pb.JobSpec:
    return pb.JobSpec(id=job_id, schedule="*/5 * * * *", target=pb.Target(handler="jobs.ok"), **fields)


RETRY = pb.RetryPolicy(max_attempts=5, backoff_initial=Duration(seconds=30), backoff_multiplier=3.0)
HISTORY = pb.HistoryPolicy(keep_runs=10, max_age=Duration(seconds=3600))


def test_a_repeated_policy_is_one_shared_record_equal_to_a_fresh_conversion():
    first = spec_from_pb(pb_spec("a", retry=RETRY, history=HISTORY, misfire=pb.MisfirePolicy(policy="skip")))
    second = spec_from_pb(pb_spec("b", retry=RETRY, history=HISTORY, misfire=pb.MisfirePolicy(policy="skip")))
    assert first.retry is second.retry and first.history is second.history and first.misfire is second.misfire
    assert first.retry == model.RetryPolicy(
        max_attempts=5, backoff_initial_us=30_000_000, backoff_max_us=300_000_000, backoff_multiplier=3.0
    )
    assert first.history == model.HistoryPolicy(
        keep_runs=10,
        max_age_us=3_600_000_000,
        keep_failed_runs=model.HistoryPolicy().keep_failed_runs,
        failed_max_age_us=model.HistoryPolicy().failed_max_age_us,
    )
    assert first.misfire == model.MisfirePolicy(policy="skip", max_catch_up=0)  # a set message says 0


def test_different_policies_stay_different():
    short = spec_from_pb(pb_spec("a", retry=pb.RetryPolicy(max_attempts=2)))
    long = spec_from_pb(pb_spec("b", retry=pb.RetryPolicy(max_attempts=9, final_exit_codes=[3, 4])))
    assert (short.retry.max_attempts, long.retry.max_attempts) == (2, 9)
    assert long.retry.final_exit_codes == (3, 4) and short.retry.final_exit_codes is not long.retry.final_exit_codes


@pytest.mark.parametrize("set_first", [True, False])
def test_an_empty_misfire_message_and_an_unset_one_are_not_confused(set_first):
    # Both serialize to no bytes; set, its max_catch_up is the 0 it says, unset it is the default.
    unset, empty = pb_spec("u"), pb_spec("e", misfire=pb.MisfirePolicy())
    order = [empty, unset] if set_first else [unset, empty]
    converted = {spec.id: spec_from_pb(spec) for spec in order}
    assert converted["u"].misfire.max_catch_up == model.MisfirePolicy().max_catch_up != 0
    assert converted["e"].misfire.max_catch_up == 0


def test_the_memo_is_bounded_and_still_right_when_it_overflows():
    for attempts in range(1, 1500):
        spec = spec_from_pb(pb_spec(f"j{attempts}", retry=pb.RetryPolicy(max_attempts=attempts)))
        assert spec.retry.max_attempts == attempts
    assert len(convert._RETRY_MEMO) <= convert._MEMO_MAX


def test_a_bad_shared_policy_is_reported_for_every_spec_that_shares_it():
    bad = pb.RetryPolicy(backoff_multiplier=math.nan)
    specs = [spec_from_pb(pb_spec(job_id, retry=bad)) for job_id in ("a", "b", "c")]
    assert specs[0].retry is specs[2].retry
    for spec in specs:
        assert "retry.backoff.multiplier" in {p.field for p in validate_spec(spec)}


def test_a_shared_record_is_checked_once_and_its_answer_not_leaked_between_records(monkeypatch):
    calls = []

    def counted(retry):
        calls.append(retry)
        return real(retry)

    real = rules._retry_problems
    monkeypatch.setattr(rules, "_retry_problems", counted)
    monkeypatch.setattr(rules, "_SHARED_RECORD_PROBLEMS", {})
    good = model.RetryPolicy(max_attempts=4)
    bad = model.RetryPolicy(max_attempts=0)
    base = model.JobSpec(id="a", schedule="*/5 * * * *", target_kind="handler", target="jobs.ok")
    for job_id in ("a", "b", "c"):
        assert validate_spec(model.JobSpec(**{**_fields(base), "id": job_id, "retry": good})) == []
    assert calls == [good]
    problems = validate_spec(model.JobSpec(**{**_fields(base), "retry": bad}))
    assert [p.field for p in problems] == ["retry.max_attempts"]


def test_one_record_in_two_fields_is_checked_by_each_fields_rule():
    # A spec built in code may put its retry policy where the history belongs: the history rule
    # still refuses it, though the retry rule has just passed the same object.
    retry = model.RetryPolicy(max_attempts=4)
    spec = model.JobSpec(
        id="a", schedule="*/5 * * * *", target_kind="handler", target="jobs.ok", retry=retry, history=retry
    )
    assert [p.field for p in validate_spec(spec)] == ["history"]


def _fields(spec: model.JobSpec) -> dict:
    return {name: getattr(spec, name) for name in spec.__struct_fields__}


# The wire checks skip what cannot be wrong (an unset sub-message, a short printable ASCII value);
# a problem in what they still look at is named with its full path, as before.
WIRE_CASES = [
    ("misfire policy with a control character", {"misfire": pb.MisfirePolicy(policy="a\x1b")}, "misfire.policy"),
    ("misfire grace negative", {"misfire": pb.MisfirePolicy(grace=Duration(seconds=-1))}, "misfire.grace"),
    ("DST gap too long", {"dst": pb.DstPolicy(gap="g" * 500)}, "dst.gap"),
    ("calendar on_skip with a C1 control", {"calendar": pb.CalendarRule(on_skip="x\x85")}, "calendar.on_skip"),
    ("id with a C1 control", {"id": "job\x9b"}, "id"),
    ("retry within negative", {"retry": pb.RetryPolicy(within=Duration(seconds=-2))}, "retry.within"),
    ("retry multiplier infinite", {"retry": pb.RetryPolicy(backoff_multiplier=math.inf)}, "retry.backoff_multiplier"),
    ("overlap unknown", {"overlap": 99}, "overlap"),
    ("timeout negative", {"timeout": Duration(seconds=-1)}, "timeout"),
]


@pytest.mark.parametrize(("fields", "field"), [c[1:] for c in WIRE_CASES], ids=[c[0] for c in WIRE_CASES])
def test_the_wire_check_names_the_field_of_the_third_spec(fields, field):
    fields = dict(fields)
    job_id = fields.pop("id", "c")
    request = jobs_pb2.ApplyJobsRequest(jobs=[pb_spec("a"), pb_spec("b"), pb_spec(job_id, **fields)])
    assert [problem.field for problem in request_problems(request)] == [f"jobs[2].{field}"]


def test_printable_non_ascii_text_passes_the_wire_check():
    request = jobs_pb2.ApplyJobsRequest(jobs=[pb_spec("a", owner="équipe-données", timezone="Europe/Zürich")])
    assert request_problems(request) == []
