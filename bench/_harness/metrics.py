"""Counters and histograms scraped from a node's /metrics (a cluster started with `metrics`)."""

from __future__ import annotations

import urllib.request

from scheduler.local import LocalCluster


def _node_samples(cluster: LocalCluster, node_id: str):
    """Every sample of one node's /metrics (the cluster started with `metrics`), from one scrape."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(cluster.member(node_id).metrics_url, timeout=10) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        yield from family.samples


def node_counters(cluster: LocalCluster, node_id: str, names: tuple[str, ...]) -> dict[str, float]:
    """Counters of one node's /metrics, as "name{label=value,...}"."""
    found = {}
    for sample in _node_samples(cluster, node_id):
        if sample.name.removesuffix("_total") in names and sample.name.endswith("_total"):
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            found[f"{sample.name.removesuffix('_total')}{{{labels}}}"] = sample.value
    return found


def node_histograms(cluster: LocalCluster, node_id: str, name: str, by_label: str) -> dict[str, dict[float, float]]:
    """The histograms `name` of one node's /metrics, by their `by_label` value: upper bound ->
    cumulative count."""
    found: dict[str, dict[float, float]] = {}
    for sample in _node_samples(cluster, node_id):
        if sample.name == f"{name}_bucket":
            found.setdefault(sample.labels.get(by_label, ""), {})[float(sample.labels["le"])] = sample.value
    return found


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The upper bound of the bucket holding quantile `q` of the observations between two scrapes."""
    bounds = sorted(after)
    if not bounds:
        return None
    total = after[bounds[-1]] - before.get(bounds[-1], 0.0)
    if total <= 0:
        return None
    for bound in bounds:
        if after[bound] - before.get(bound, 0.0) >= q * total:
            return bound
    return bounds[-1]
