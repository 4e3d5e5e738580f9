"""Declarative job files -> validated JobSpecs, all or nothing.

A job file is YAML: a mapping `{jobs: [...]}` (or a bare list of jobs). Each job is a mapping;
`examples/jobs.yaml` shows every field. Reading a file collects *every* problem in it and
returns nothing if there is any: a file is applied whole or not at all.

One set of rules: the document reader (reader.py) only turns YAML shapes into a JobSpec
(durations to microseconds, `target` to kind + name, `payload` to canonical JSON, `class` to
`job_class`) and reports what it cannot turn; every rule on values lives in `validate_spec`
(rules.py), which the server also runs on specs that arrive over gRPC. Problems name fields as
the document does ("class", "timeout", "retry.backoff.initial"), also for specs that did not
come from a file. render.py turns specs back into documents; payload.py holds the canonical
JSON form of payloads that both directions share. apply_plan.py decides what applying a set of
specs does to the jobs a replica holds: what a prune removes and what the caller may touch.
"""

from scheduler.planning.durations import format_duration_us, parse_duration_us
from scheduler.specs.payload import MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH, canonical_payload_json
from scheduler.specs.problems import SpecError, SpecProblem
from scheduler.specs.reader import MAX_FILE_BYTES, MAX_JOBS, load_job_document, load_jobs_file, parse_jobs_document
from scheduler.specs.render import spec_to_document
from scheduler.specs.rules import (
    MAX_NAME_CHARS,
    MAX_OWNER_CHARS,
    MAX_SHELL_BYTES,
    MAX_USES,
    name_problem,
    text_problem,
    validate_resource,
    validate_spec,
)

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_JOBS",
    "MAX_NAME_CHARS",
    "MAX_OWNER_CHARS",
    "MAX_PAYLOAD_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "MAX_SHELL_BYTES",
    "MAX_USES",
    "SpecError",
    "SpecProblem",
    "canonical_payload_json",
    "format_duration_us",
    "load_job_document",
    "load_jobs_file",
    "name_problem",
    "parse_duration_us",
    "parse_jobs_document",
    "spec_to_document",
    "text_problem",
    "validate_resource",
    "validate_spec",
]
