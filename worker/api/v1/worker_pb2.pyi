import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from worker.api.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LeaseOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEASE_OUTCOME_UNSPECIFIED: _ClassVar[LeaseOutcome]
    OK: _ClassVar[LeaseOutcome]
    FENCED: _ClassVar[LeaseOutcome]
    NOT_FOUND: _ClassVar[LeaseOutcome]
    RUN_CANCELLED: _ClassVar[LeaseOutcome]

class CompletionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPLETION_KIND_UNSPECIFIED: _ClassVar[CompletionKind]
    SUCCESS: _ClassVar[CompletionKind]
    FAILURE: _ClassVar[CompletionKind]
    RETRY_LATER: _ClassVar[CompletionKind]
LEASE_OUTCOME_UNSPECIFIED: LeaseOutcome
OK: LeaseOutcome
FENCED: LeaseOutcome
NOT_FOUND: LeaseOutcome
RUN_CANCELLED: LeaseOutcome
COMPLETION_KIND_UNSPECIFIED: CompletionKind
SUCCESS: CompletionKind
FAILURE: CompletionKind
RETRY_LATER: CompletionKind

class LeaseRef(_message.Message):
    __slots__ = ("job_id", "scheduled_at", "fencing_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    scheduled_at: _timestamp_pb2.Timestamp
    fencing_token: int
    def __init__(self, job_id: _Optional[str] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fencing_token: _Optional[int] = ...) -> None: ...

class LeaseRequest(_message.Message):
    __slots__ = ("worker_id", "targets", "max_runs", "wait")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    targets: _containers.RepeatedScalarFieldContainer[str]
    max_runs: int
    wait: _duration_pb2.Duration
    def __init__(self, worker_id: _Optional[str] = ..., targets: _Optional[_Iterable[str]] = ..., max_runs: _Optional[int] = ..., wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class LeaseGrant(_message.Message):
    __slots__ = ("job_id", "scheduled_at", "run_key", "fencing_token", "attempt", "deadline", "lease_ttl", "target", "payload_json")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    RUN_KEY_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    scheduled_at: _timestamp_pb2.Timestamp
    run_key: str
    fencing_token: int
    attempt: int
    deadline: _timestamp_pb2.Timestamp
    lease_ttl: _duration_pb2.Duration
    target: _common_pb2.Target
    payload_json: str
    def __init__(self, job_id: _Optional[str] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., run_key: _Optional[str] = ..., fencing_token: _Optional[int] = ..., attempt: _Optional[int] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., target: _Optional[_Union[_common_pb2.Target, _Mapping]] = ..., payload_json: _Optional[str] = ...) -> None: ...

class LeaseResponse(_message.Message):
    __slots__ = ("leases", "leader_address")
    LEASES_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[LeaseGrant]
    leader_address: str
    def __init__(self, leases: _Optional[_Iterable[_Union[LeaseGrant, _Mapping]]] = ..., leader_address: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("worker_id", "leases")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    leases: _containers.RepeatedCompositeFieldContainer[LeaseRef]
    def __init__(self, worker_id: _Optional[str] = ..., leases: _Optional[_Iterable[_Union[LeaseRef, _Mapping]]] = ...) -> None: ...

class LeaseResult(_message.Message):
    __slots__ = ("lease", "outcome", "expires_at")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    outcome: LeaseOutcome
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., outcome: _Optional[_Union[LeaseOutcome, str]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[LeaseResult]
    def __init__(self, results: _Optional[_Iterable[_Union[LeaseResult, _Mapping]]] = ...) -> None: ...

class CompleteRequest(_message.Message):
    __slots__ = ("worker_id", "lease", "kind", "exit_code", "error", "output_tail", "retry_after", "final", "stdout_tail", "stderr_tail", "exception_type", "http_status")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    EXCEPTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    lease: LeaseRef
    kind: CompletionKind
    exit_code: int
    error: str
    output_tail: str
    retry_after: _duration_pb2.Duration
    final: bool
    stdout_tail: str
    stderr_tail: str
    exception_type: str
    http_status: int
    def __init__(self, worker_id: _Optional[str] = ..., lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., kind: _Optional[_Union[CompletionKind, str]] = ..., exit_code: _Optional[int] = ..., error: _Optional[str] = ..., output_tail: _Optional[str] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., final: _Optional[bool] = ..., stdout_tail: _Optional[str] = ..., stderr_tail: _Optional[str] = ..., exception_type: _Optional[str] = ..., http_status: _Optional[int] = ...) -> None: ...

class CompleteResponse(_message.Message):
    __slots__ = ("outcome",)
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    outcome: LeaseOutcome
    def __init__(self, outcome: _Optional[_Union[LeaseOutcome, str]] = ...) -> None: ...

class CompleteManyRequest(_message.Message):
    __slots__ = ("worker_id", "completions")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    completions: _containers.RepeatedCompositeFieldContainer[CompleteRequest]
    def __init__(self, worker_id: _Optional[str] = ..., completions: _Optional[_Iterable[_Union[CompleteRequest, _Mapping]]] = ...) -> None: ...

class CompleteManyResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CompleteResponse]
    def __init__(self, results: _Optional[_Iterable[_Union[CompleteResponse, _Mapping]]] = ...) -> None: ...

class SessionOpen(_message.Message):
    __slots__ = ("worker_id", "targets")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    targets: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, worker_id: _Optional[str] = ..., targets: _Optional[_Iterable[str]] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ("open", "credits", "heartbeat", "complete", "seq")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    open: SessionOpen
    credits: int
    heartbeat: HeartbeatRequest
    complete: CompleteManyRequest
    seq: int
    def __init__(self, open: _Optional[_Union[SessionOpen, _Mapping]] = ..., credits: _Optional[int] = ..., heartbeat: _Optional[_Union[HeartbeatRequest, _Mapping]] = ..., complete: _Optional[_Union[CompleteManyRequest, _Mapping]] = ..., seq: _Optional[int] = ...) -> None: ...

class SessionRefusal(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ("opened", "grants", "heartbeat", "complete", "refused", "seq")
    OPENED_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    opened: SessionOpened
    grants: LeaseResponse
    heartbeat: HeartbeatResponse
    complete: CompleteManyResponse
    refused: SessionRefusal
    seq: int
    def __init__(self, opened: _Optional[_Union[SessionOpened, _Mapping]] = ..., grants: _Optional[_Union[LeaseResponse, _Mapping]] = ..., heartbeat: _Optional[_Union[HeartbeatResponse, _Mapping]] = ..., complete: _Optional[_Union[CompleteManyResponse, _Mapping]] = ..., refused: _Optional[_Union[SessionRefusal, _Mapping]] = ..., seq: _Optional[int] = ...) -> None: ...

class SessionOpened(_message.Message):
    __slots__ = ("max_credits",)
    MAX_CREDITS_FIELD_NUMBER: _ClassVar[int]
    max_credits: int
    def __init__(self, max_credits: _Optional[int] = ...) -> None: ...
