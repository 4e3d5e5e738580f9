"""Job files: `after:` (job dependencies); what it reads as, what is refused, and the wire form."""

from __future__ import annotations

import pytest
import yaml
from msgspec import UNSET

from scheduler.rpc.convert import spec_from_pb, spec_to_pb
from scheduler.specs import spec_to_document
from scheduler.specs.reader import parse_job_document
from tests.unit.specs.one_job import problems, read


def test_after_reads_a_name_or_a_list_and_renders_back() -> None:
    assert read(after="extract").after == ("extract",)
    spec = read(after=["extract", "fetch"])
    assert spec.after == ("extract", "fetch") and spec.schedule == ""
    assert spec_to_document(spec)["after"] == ["extract", "fetch"]
    again = parse_job_document(yaml.safe_dump({"jobs": [spec_to_document(spec)]})).jobs[0]
    assert again == spec
    assert read(schedule="0 * * * *").after is UNSET


def test_after_travels_over_grpc_and_stays_unset_without_it() -> None:
    assert spec_from_pb(spec_to_pb(read(after=["a", "b"]))).after == ("a", "b")
    assert spec_from_pb(spec_to_pb(read(schedule="0 * * * *"))).after is UNSET


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"after": "j"}, "after", "names the job itself"),
        ({"after": []}, "after", "must be a job id or a list of 1 to 16 job ids"),
        ({"after": 3}, "after", "not an integer"),
        ({"after": ["a", "a"]}, "after", "at most 16 distinct job ids"),
        ({"after": ["a b"]}, "after", "job id"),
        ({"after": "a", "schedule": "0 * * * *"}, "schedule", "has no schedule of its own"),
        ({"after": "a", "every": "1m"}, "every", "has no schedule of its own"),
    ],
)
def test_what_after_refuses(fields, field: str, message: str) -> None:
    found = problems(**fields)
    assert any(f == field and message in m for f, m in found), found


def test_the_dependencies_example_reads_and_its_graph_is_accepted() -> None:
    from pathlib import Path

    from scheduler.core.commands import ApplyJobs, JobUpsert
    from scheduler.core.dependencies import dependency_problem
    from scheduler.core.state import State
    from scheduler.specs import load_jobs_file

    specs = load_jobs_file(Path(__file__).resolve().parents[3] / "examples" / "dependencies.yaml")
    assert {s.id: s.after for s in specs if s.after}["etl.publish"] == ("etl.extract", "etl.fetch-rates")
    apply = ApplyJobs(1, "a", "r", tuple(JobUpsert(s, 0, 0) for s in specs))
    assert dependency_problem(State(), apply) == ""
