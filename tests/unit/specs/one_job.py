"""Read one job of a job file the way `raftcron apply` does, for the tests of single fields."""

from __future__ import annotations

import pytest
import yaml

from scheduler.core.model import JobSpec
from scheduler.specs import SpecError
from scheduler.specs.reader import parse_job_document


def read(**fields) -> JobSpec:
    """The spec of job `j` (target demo.hello) with `fields` added to its document."""
    document = {"jobs": [{"id": "j", "target": "demo.hello", **fields}]}
    return parse_job_document(yaml.safe_dump(document, sort_keys=False), "jobs.yaml").jobs[0]


def problems(**fields) -> list[tuple[str, str]]:
    """(field, message) of each problem reading that job; the test fails if it reads cleanly."""
    with pytest.raises(SpecError) as caught:
        read(**fields)
    return [(p.field, p.message) for p in caught.value.problems]
