"""`python -m bench apply_path` runs the whole ApplyJobs path on the realistic mix (the private
names it imports are the servicer's own), and refuses to time a mix the node would refuse."""

from __future__ import annotations

import pytest

from bench import apply_path
from bench.scale import realistic_specs
from scheduler.rpc.convert import spec_to_pb
from worker.api.v1 import jobs_pb2


def requests_of(specs) -> list[bytes]:
    return [jobs_pb2.ApplyJobsRequest(jobs=[spec_to_pb(s) for s in specs], request_id="r").SerializeToString()]


def test_every_stage_is_timed_for_the_realistic_mix():
    timed = apply_path.measure(requests_of(realistic_specs(300)), 300)
    assert list(timed) == list(apply_path.STAGES)
    assert all(us >= 0 for us in timed.values()) and sum(timed.values()) > 0


def test_a_mix_the_node_would_refuse_is_not_timed():
    specs = realistic_specs(10)
    with pytest.raises(RuntimeError, match="refused"):
        apply_path.measure(requests_of([*specs, specs[0]]), 11)  # a job listed twice
