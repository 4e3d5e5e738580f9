"""The chaos scenarios by name: each takes a Scene (and the run options) and returns a History."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Scenario:
    run: Callable
    nodes: int = 3
    settings: dict = field(default_factory=dict)  # node config overrides


def _registry() -> dict[str, Scenario]:
    from tests.chaos.scenarios import leader

    return {
        "kill_leader_enqueue": Scenario(leader.kill_leader_enqueue),
    }


SCENARIOS = _registry()
