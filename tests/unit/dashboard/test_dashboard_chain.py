"""The dashboard's job and run pages for a dependency chain: links to parents and children, and a
dependency run's parents' runs of its slot."""

from __future__ import annotations

from scheduler.core.model import SECOND_US, RetryPolicy
from scheduler.dashboard import data, fates, views
from scheduler.dashboard.svg import run_href
from scheduler.dashboard.views import job_href
from tests.fakes import T0_US, Core, claim, completion, lease_ref, run_ref, spec, upsert

DAY_US = 86_400 * SECOND_US
SLOT = T0_US + 10 * SECOND_US


def _chain() -> Core:
    core = Core()
    core.lead()
    core.advance(T0_US)
    jobs = (
        upsert(spec("extract", retry=RetryPolicy(max_attempts=1)), next_due_us=SLOT),
        upsert(spec("load", "", after=("extract",))),
        upsert(spec("report", "", after=("load",))),
    )
    assert core.apply_jobs(jobs).accepted
    assert core.claim_runs(claim("extract", SLOT, SLOT + 10 * SECOND_US)).accepted
    assert core.grant(run_ref("extract", SLOT)).accepted
    core.complete(completion(lease_ref("extract", SLOT, core.index)))
    return core


def _job_page(core: Core, job_id: str) -> str:
    from_us, to_us = T0_US - DAY_US, T0_US + DAY_US
    detail = data.job_detail(core.state, job_id, from_us, to_us, 0)
    slots, cut = fates.timeline(detail, from_us, to_us)
    fires = data.next_fires(detail.row.spec, detail.cursor_us, detail.spread_us)
    return views.job_page(detail, slots, cut, fires, from_us, to_us)


def test_the_job_page_links_the_chain_both_ways() -> None:
    core = _chain()
    middle = _job_page(core, "load")
    assert "runs after" in middle and f'href="{job_href("extract")}"' in middle
    assert "runs before" in middle and f'href="{job_href("report")}"' in middle
    assert "after extract" in middle and "manual-only" not in middle
    top = _job_page(core, "extract")
    assert f'href="{job_href("load")}"' in top and "runs after" not in top


def test_a_dependency_runs_page_links_its_parents_run_of_the_slot() -> None:
    core = _chain()
    page = views.run_page(data.run_detail(core.state, "load", SLOT))
    assert "dependency" in page and ("parents&#x27; runs" in page or "parents' runs" in page)
    assert f'href="{run_href("extract", SLOT)}"' in page
