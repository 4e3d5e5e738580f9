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
    from tests.chaos.scenarios import clock, disk, leader, network, power, restart, soak, workers

    return {
        "kill_leader_enqueue": Scenario(leader.kill_leader_enqueue),
        "kill_leader_leasing": Scenario(leader.kill_leader_leasing),
        "isolate_leader": Scenario(leader.isolate_leader),
        "pause_leader": Scenario(leader.pause_leader),
        "kill_leader_repeatedly": Scenario(leader.kill_leader_repeatedly),
        "partitions": Scenario(network.partitions),
        "lossy_links": Scenario(network.lossy_links),
        "minority_partition": Scenario(network.minority_partition, nodes=5),
        "lossy_phases": Scenario(network.lossy_phases),
        "restart_all": Scenario(restart.restart_all),
        "power_loss": Scenario(power.power_loss, settings=power.SETTINGS),
        "power_loss_unsynced": Scenario(power.power_loss, settings=power.UNSYNCED),
        "pause_worker": Scenario(workers.pause_worker),
        "cut_worker": Scenario(workers.cut_worker),
        "kill_worker": Scenario(workers.kill_worker),
        "rolling_restart": Scenario(workers.rolling_restart),
        "disk_full": Scenario(disk.disk_full),
        "clock_skew": Scenario(clock.clock_skew),
        "soak": Scenario(soak.soak),
    }


SCENARIOS = _registry()
