"""Every limit a node puts on what one client may ask of it, in one place.

Three kinds: sizes and counts of request fields (checked by `scheduler.rpc.request_checks` before a
servicer sees the request), the gRPC transport (message size, streams per connection, calls in
flight, connections), and how long calls may hold a server thread (long polls, reading the
request: `scheduler.rpc.intake`). The job spec's own value
rules (durations, priorities, payload depth...) live in `scheduler.specs`; this module reuses
its bounds so the file reader and the gRPC API refuse the same things.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler import specs
from scheduler.planning.durations import DAY
from scheduler.replication.raftlog import MAX_ENTRY_BYTES

# Instants a request may name: 1970-01-01 up to the last second of 9999 (google.protobuf.Timestamp's
# own documented range ends there; schedules never need more).
MAX_INSTANT_S = 253_402_300_799


@dataclass(frozen=True)
class RpcLimits:
    # -- transport -------------------------------------------------------------------------------
    # Largest request or response message; an ApplyJobs dry run of a big file is the largest call.
    max_message_bytes: int = 16 << 20
    # A write whose request alone is larger would not fit one log entry even compressed (a large
    # command is stored zlib-compressed, about a tenth of its size, in entries of MAX_ENTRY_BYTES):
    # refused before any planning. Dry runs never reach the log and may use the whole message.
    max_write_request_bytes: int = 8 * MAX_ENTRY_BYTES
    # HTTP/2 streams one connection may have open at once (more wait in the client's queue).
    max_streams_per_connection: int = 256
    # Calls a node handles or queues at once; beyond, gRPC answers RESOURCE_EXHAUSTED at once.
    max_concurrent_calls: int = 512
    # Lease long polls waiting at once on one node: each holds a server thread, so this stays
    # well below the thread pool (grpc_threads, 64 by default) and other calls keep theirs.
    max_concurrent_lease_waits: int = 32
    # Status calls computing a state digest at once (each encodes the whole state under its lock).
    max_concurrent_digests: int = 1
    # A long poll ends this long before its caller's deadline, so its answer still arrives.
    deadline_margin_s: float = 0.25
    # A call's request message must have arrived this long after the call started, or the call
    # is cancelled: its pool thread waits for it (a request of 16 MiB needs 13 s at 10 Mbit/s).
    request_read_timeout_s: float = 15.0
    # A read still waiting after this is slow (a message normally arrives with its call's headers).
    # Slow reads, node-wide (the node also keeps them to a quarter of grpc_threads) and of one
    # caller (a principal, or a host without tokens): one beyond is cancelled at once, and the
    # caller's next calls are refused RESOURCE_EXHAUSTED while its slow reads last.
    slow_request_read_s: float = 0.5
    max_slow_request_reads: int = 16
    max_slow_request_reads_per_caller: int = 4
    # Connections: one without calls for this long is closed; every connection is closed after
    # max_connection_age_s (plus a grace for its calls in flight; clients reconnect at once); the
    # node pings a connection silent for keepalive_time_s and closes it, with its calls, when
    # no answer comes within keepalive_timeout_s (a caller that vanished holds nothing).
    max_connection_idle_s: float = 300.0
    max_connection_age_s: float = 3600.0
    max_connection_age_grace_s: float = 120.0
    keepalive_time_s: float = 60.0
    keepalive_timeout_s: float = 20.0

    # -- identifiers and text ----------------------------------------------------------------------
    max_id_chars: int = specs.MAX_NAME_CHARS  # job ids, classes, handler and resource names
    max_worker_id_chars: int = 256
    max_request_id_chars: int = 128
    max_author_chars: int = specs.MAX_OWNER_CHARS
    max_owner_chars: int = specs.MAX_OWNER_CHARS
    max_reason_chars: int = 1024
    max_page_token_chars: int = 512
    max_run_key_chars: int = specs.MAX_NAME_CHARS + 64
    max_address_chars: int = 256  # a member's "host:port"
    # A worker's error message and output tail (the server keeps the first/last 4,096 characters).
    max_error_bytes: int = 64 * 1024
    max_output_tail_bytes: int = 64 * 1024
    # Spec text fields, checked here only for size (validate_spec says what else is wrong).
    max_schedule_chars: int = 256
    max_timezone_chars: int = 64
    max_jitter_chars: int = 64
    max_policy_chars: int = 64
    max_shell_bytes: int = specs.MAX_SHELL_BYTES
    max_payload_bytes: int = specs.MAX_PAYLOAD_BYTES
    max_payload_depth: int = specs.MAX_PAYLOAD_DEPTH

    # -- counts ----------------------------------------------------------------------------------
    max_jobs_per_apply: int = 10_000
    max_resources_per_apply: int = 1_000
    max_uses_per_job: int = specs.MAX_USES
    max_targets_per_lease: int = 256
    # Runs one Lease may ask for; the node grants at most 1,000 per call whatever is asked.
    max_runs_asked_per_lease: int = 100_000
    max_leases_per_heartbeat: int = 10_000
    max_statuses_per_filter: int = 16
    max_page_size: int = 10_000  # larger asks are refused; up to it, servers cap to their page size
    max_backfill_runs: int = 10_000

    # -- numbers and durations ---------------------------------------------------------------------
    max_lease_wait_s: float = 600.0  # refused beyond; the node caps waits lower (max_lease_wait_s in its config)
    max_retry_after_us: int = DAY
    max_spec_duration_us: int = 365 * DAY  # any duration in a spec, before validate_spec's own bounds
    min_backfill_rate_per_s: float = 1 / 86_400
    max_backfill_rate_per_s: float = 1_000_000.0


DEFAULT_LIMITS = RpcLimits()
