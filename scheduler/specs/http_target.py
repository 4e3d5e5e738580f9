"""`target: {http: {...}}`: reading the mapping of a job file and the rules on its values.

The rules are checked where every spec is (`validate_spec`, so the job file reader and the
ApplyJobs servicer agree). Which hosts a worker may call is not decided here: that is the
worker operator's `--http-allow` (docs/design/http-target.md).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from scheduler.core.model import HttpTarget
from scheduler.planning.durations import DurationError, parse_duration_us, type_name

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# Methods whose requests carry no body here (a GET with a body is ignored by most servers).
BODYLESS_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
HTTP_KEYS = ("url", "method", "headers", "body", "timeout", "success_codes", "follow_redirects")
MAX_URL_CHARS = 2048
MAX_HEADERS = 32
MAX_HEADER_NAME_CHARS = 128
MAX_HEADER_VALUE_CHARS = 4096
MAX_BODY_BYTES = 64 * 1024
MAX_SUCCESS_CODES = 32
# Set by the worker for every request: a job setting them could forge another run's identity.
# Host, Content-Length and the hop-by-hop headers belong to the HTTP client.
WORKER_HEADERS = ("idempotency-key", "x-raftcron-fencing-token", "x-raftcron-job", "x-raftcron-scheduled-at",
                  "x-raftcron-attempt")  # fmt: skip
RESERVED_HEADERS = frozenset(
    (*WORKER_HEADERS, "host", "content-length", "transfer-encoding", "connection", "te", "upgrade", "trailer")
)
RESERVED_PREFIX = "x-raftcron-"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 field names
_VALUE = re.compile(r"[\t\x20-\x7e]*")  # visible ASCII, space and tab: no CR, LF or NUL


def read_http_target(value: object, fail) -> HttpTarget | None:
    """The HttpTarget of a job file's `target: {http: ...}` mapping; `fail(field, message)` for
    what cannot be read (the rest is checked by `http_target_problems`)."""
    if isinstance(value, str):
        value = {"url": value}  # `{http: URL}`: a GET with every default
    if not isinstance(value, dict):
        fail("target.http", f"must be a URL or a mapping with `url:`, not {type_name(value)}")
        return None
    args: dict[str, object] = {}
    for key, item in value.items():
        if key not in HTTP_KEYS:
            fail(f"target.http.{key}", f"unknown key; known keys: {', '.join(HTTP_KEYS)}")
        elif key == "headers":
            args["headers"] = _read_headers(item, fail)
        elif key == "timeout":
            try:
                args["timeout_us"] = parse_duration_us(item, "target.http.timeout")
            except DurationError as error:
                fail("target.http.timeout", error.message)
            else:
                if args["timeout_us"] == 0:  # 0 is how the spec says "the job's timeout"
                    fail("target.http.timeout", "must be at least 1ms (leave it out to use the job's timeout)")
        elif key == "success_codes":
            args["success_codes"] = tuple(item) if isinstance(item, list) else (item,)
        elif key == "method":
            args["method"] = item.upper() if isinstance(item, str) else item
        else:
            args[key] = item
    if "url" not in args:
        fail("target.http.url", "is required")
        return None
    return HttpTarget(**args)  # type: ignore[arg-type]  # values are checked by http_target_problems


def _read_headers(value: object, fail) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        fail("target.http.headers", f"must be a mapping of header names to values, not {type_name(value)}")
        return ()
    return tuple((name, item) for name, item in value.items())  # type: ignore[misc]


def http_target_problems(http: object, url_target: str, job_timeout_us: int) -> list[tuple[str, str]]:
    """Every problem of a job's HTTP request, as (field, message)."""
    if not isinstance(http, HttpTarget):
        return [("target.http", f"must be an HTTP request, not {type_name(http)}")]
    found: list[tuple[str, str]] = []

    def check(field: str, message: str | None) -> None:
        if message:
            found.append((f"target.http.{field}", message))

    check("url", url_problem(http.url))
    if http.url != url_target:
        found.append(("target", "an HTTP job's target must be its URL"))
    if http.method not in HTTP_METHODS:
        check("method", f"must be one of {', '.join(HTTP_METHODS)}, not {_shown(http.method)}")
    check("headers", _headers_problem(http.headers))
    check("body", _body_problem(http.body, http.method))
    check("timeout", _timeout_problem(http.timeout_us, job_timeout_us))
    check("success_codes", _codes_problem(http.success_codes))
    if not isinstance(http.follow_redirects, bool):
        check("follow_redirects", f"must be true or false, not {type_name(http.follow_redirects)}")
    return found


def http_payload_problem(http: object, payload_json: str) -> str | None:
    """The job's payload is the request's JSON body: not with a `body`, nor on a bodyless method."""
    if not payload_json or not isinstance(http, HttpTarget):
        return None
    if http.body:
        return "an HTTP job sends either its `payload` (as JSON) or its `body`, not both"
    if http.method in BODYLESS_METHODS:
        return f"a {http.method} request sends no body, so the payload would be lost: use POST, PUT or PATCH"
    return None


def url_problem(url: object) -> str | None:
    if not isinstance(url, str):
        return f"must be a string, not {type_name(url)}"
    if len(url) > MAX_URL_CHARS:
        return f"is {len(url)} characters long; at most {MAX_URL_CHARS} are allowed"
    if not url or any(c.isspace() or not c.isprintable() for c in url):
        return "must be a URL without spaces or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port that is not a number in 0-65535
    except ValueError as error:
        return f"is not a valid URL ({error})"
    if parts.scheme not in ("http", "https"):
        return f"must start with http:// or https://, not {_shown(parts.scheme + ':' if parts.scheme else url)}"
    if not parts.hostname:
        return "must name a host (http://HOST[:PORT]/PATH)"
    if "@" in parts.netloc:
        return "must not hold a user or password (user:password@): every reader sees the spec"
    if port == 0:
        return "port 0 is not a port a server listens on"
    if parts.fragment or url.endswith("#"):
        return "must not have a #fragment (it is never sent to the server)"
    return None


def _headers_problem(headers: object) -> str | None:
    if not isinstance(headers, tuple):
        return f"must be a mapping of names to values, not {type_name(headers)}"
    if len(headers) > MAX_HEADERS:
        return f"has {len(headers)} headers; at most {MAX_HEADERS} are allowed"
    seen: set[str] = set()
    for pair in headers:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            return "must be a mapping of names to values"
        name, value = pair
        if not isinstance(name, str) or not _TOKEN.fullmatch(name) or len(name) > MAX_HEADER_NAME_CHARS:
            return f"name {_shown(name)} is not a header name (letters, digits and !#$%&'*+-.^_`|~, at most 128)"
        lowered = name.lower()
        if lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_PREFIX):
            return f"{name} is set by the worker (or the HTTP client), not by the job"
        if lowered in seen:
            return f"{name} is given twice"
        seen.add(lowered)
        if not isinstance(value, str):
            return f"{name}: the value must be a string, not {type_name(value)} (quote it)"
        if not _VALUE.fullmatch(value) or len(value) > MAX_HEADER_VALUE_CHARS:
            return f"{name}: the value must be printable ASCII (no CR, LF or NUL), at most {MAX_HEADER_VALUE_CHARS}"
    return None


def _body_problem(body: object, method: object) -> str | None:
    if not isinstance(body, str):
        return f"must be a string, not {type_name(body)} (use the job's `payload:` to send JSON)"
    size = len(body.encode("utf-8", errors="surrogatepass"))
    if size > MAX_BODY_BYTES:
        return f"is {size} bytes long; at most {MAX_BODY_BYTES} (64 KiB) are allowed"
    if "\x00" in body:
        return "contains a NUL character"
    if body and method in BODYLESS_METHODS:
        return f"a {method} request sends no body: use POST, PUT, PATCH or DELETE"
    return None


def _timeout_problem(timeout_us: object, job_timeout_us: int) -> str | None:
    if not isinstance(timeout_us, int) or isinstance(timeout_us, bool):
        return f"must be a duration, not {type_name(timeout_us)}"
    if timeout_us < 0 or (0 < timeout_us < 1000):
        return "must be at least 1ms (leave it out to use the job's timeout)"
    if isinstance(job_timeout_us, int) and timeout_us > job_timeout_us > 0:
        return "is longer than the job's timeout, which ends the run first"
    return None


def _codes_problem(codes: object) -> str | None:
    if not isinstance(codes, tuple):
        return f"must be a list of status codes, not {type_name(codes)}"
    if len(codes) > MAX_SUCCESS_CODES:
        return f"lists {len(codes)} codes; at most {MAX_SUCCESS_CODES} are allowed"
    for code in codes:
        if not isinstance(code, int) or isinstance(code, bool) or not 100 <= code <= 599:
            return f"{_shown(code)} is not an HTTP status code (100-599)"
    if len(set(codes)) != len(codes):
        return "lists a code twice"
    return None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
