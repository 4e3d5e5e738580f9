"""`deadline:` on a job: read with the duration parser, bounded, rendered back, carried over gRPC."""

from __future__ import annotations

import pytest
from msgspec import UNSET

from scheduler.core.model import SECOND_US
from scheduler.rpc.convert import spec_from_pb, spec_to_pb
from scheduler.specs import spec_to_document
from tests.unit.specs.one_job import problems, read


def test_a_deadline_reads_renders_and_travels_over_grpc() -> None:
    spec = read(schedule="0 6 * * *", deadline="30m")
    assert spec.deadline_us == 1800 * SECOND_US
    assert spec_to_document(spec)["deadline"] == "30m"
    assert spec_from_pb(spec_to_pb(spec)).deadline_us == 1800 * SECOND_US
    plain = read(schedule="0 6 * * *")
    assert plain.deadline_us is UNSET
    assert "deadline" not in spec_to_document(plain)
    assert spec_from_pb(spec_to_pb(plain)).deadline_us is UNSET


@pytest.mark.parametrize(("value", "words"), [("0s", "more than 0s"), ("8d", "at most 7d"), ("soon", "duration")])
def test_a_bad_deadline_is_one_problem_naming_the_field(value: str, words: str) -> None:
    ((field, message),) = problems(schedule="0 6 * * *", deadline=value)
    assert field == "deadline"
    assert words in message


def test_a_manual_only_job_has_no_slot_to_measure_a_deadline_from() -> None:
    ((field, message),) = problems(deadline="5m")
    assert field == "deadline" and "scheduled slot" in message
