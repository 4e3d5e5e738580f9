"""`python -m bench NAME [options]`: run one benchmark (see bench/README.md)."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "claims": "bench.claims",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in BENCHMARKS:
        print("usage: python -m bench {" + ",".join(BENCHMARKS) + "} [--quick] [options]", file=sys.stderr)
        print("       python -m bench NAME --help   lists a benchmark's options", file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    module = importlib.import_module(BENCHMARKS[argv[0]])
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
