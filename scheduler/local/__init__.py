"""Real node processes on this machine: the cluster behind `raftcron dev`, tests and benchmarks."""

from scheduler.local.cluster import LocalCluster, Member, rss_kib, wait_until

__all__ = ["LocalCluster", "Member", "rss_kib", "wait_until"]
