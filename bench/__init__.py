"""Benchmarks: each prints its figures next to a baseline measured in the same run.

Run from the repository root: `python -m bench <name> [--quick]`. Output JSON goes to bench/out/.
"""
