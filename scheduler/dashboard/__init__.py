"""A read-only web dashboard on every node: cluster, jobs, slot timelines, runs, herd, alerts, kills."""
