"""The `history:` block of a job spec: parsed, validated with field names, round-tripped through YAML and gRPC."""

from __future__ import annotations

import pytest

from scheduler.core.model import DAY_US, HistoryPolicy
from scheduler.rpc.convert import spec_from_pb, spec_to_pb
from scheduler.specs import SpecError, parse_jobs_document, spec_to_document
from worker.api.v1 import common_pb2 as pb


def _job(history: str) -> str:
    return f"jobs:\n  - id: a\n    schedule: '* * * * *'\n    target: demo.x\n    history: {history}\n"


def test_history_is_read_with_durations_and_zero_meaning_no_age_limit() -> None:
    (spec,) = parse_jobs_document(_job("{keep: 50, keep_for: 7d, keep_failed: 500, keep_failed_for: 0s}"))
    assert spec.history == HistoryPolicy(keep_runs=50, max_age_us=7 * DAY_US, keep_failed_runs=500, failed_max_age_us=0)


def test_unset_history_fields_take_the_defaults() -> None:
    (spec,) = parse_jobs_document(_job("{keep: 10}"))
    assert spec.history == HistoryPolicy(keep_runs=10)


@pytest.mark.parametrize(
    ("history", "field"),
    [
        ("{keep: -1}", "history.keep"),
        ("{keep: 2000000}", "history.keep"),
        ("{keep: true}", "history.keep"),
        ("{keep: 1.5}", "history.keep"),
        ("{keep_for: forever}", "history.keep_for"),
        ("{keep_failed_for: 20000d}", "history.keep_failed_for"),
        ("{kept: 3}", "history.kept"),
        ("[1, 2]", "history"),
    ],
)
def test_bad_history_is_refused_naming_the_field(history: str, field: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_jobs_document(_job(history))
    assert f"'{field}'" in str(raised.value)


def test_history_round_trips_through_the_document_form_and_protobuf() -> None:
    (spec,) = parse_jobs_document(_job("{keep: 7, keep_for: 1h, keep_failed: 0, keep_failed_for: 0s}"))
    document = spec_to_document(spec)
    assert document["history"] == {"keep": 7, "keep_for": "1h", "keep_failed": 0, "keep_failed_for": "0s"}
    assert spec_from_pb(spec_to_pb(spec)) == spec


def test_a_protobuf_spec_without_history_gets_the_defaults() -> None:
    message = pb.JobSpec(id="a", schedule="* * * * *", target=pb.Target(handler="demo.x"))
    assert spec_from_pb(message).history == HistoryPolicy()
