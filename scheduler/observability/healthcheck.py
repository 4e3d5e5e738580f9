"""The container health check: `python -m scheduler.observability.healthcheck URL` exits 0 when
URL answers 200, and 1 with the answer's line on stderr otherwise (`503: not ready: no leader is
known`). The image has Python, not curl; compose and Kubernetes call the probes with it or with
their own HTTP checks (see observability/probes.py for what the probes mean).
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

__all__ = ["main", "probe"]

TIMEOUT_S = 3.0


def probe(url: str, timeout_s: float = TIMEOUT_S) -> tuple[bool, str]:
    """(answered 200, the answer's first line or what went wrong)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status == 200, response.read(512).decode("utf-8", "replace").strip()
    except urllib.error.HTTPError as error:
        return False, f"{error.code}: {error.read(512).decode('utf-8', 'replace').strip()}"
    except (urllib.error.URLError, OSError) as error:
        return False, f"{url}: {getattr(error, 'reason', error)}"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print(
            "usage: python -m scheduler.observability.healthcheck URL   (e.g. http://127.0.0.1:9100/readyz)",
            file=sys.stderr,
        )
        return 2
    ok, line = probe(argv[0])
    if not ok:
        print(line, file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
