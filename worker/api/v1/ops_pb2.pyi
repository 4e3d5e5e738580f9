import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from worker.api.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class KillSwitch(_message.Message):
    __slots__ = ("job_class", "reason", "author", "killed_at", "until", "cancel_running")
    JOB_CLASS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    KILLED_AT_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_RUNNING_FIELD_NUMBER: _ClassVar[int]
    job_class: str
    reason: str
    author: str
    killed_at: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    cancel_running: bool
    def __init__(self, job_class: _Optional[str] = ..., reason: _Optional[str] = ..., author: _Optional[str] = ..., killed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_running: _Optional[bool] = ...) -> None: ...

class KillRecord(_message.Message):
    __slots__ = ("action", "job_class", "author", "at", "reason", "until")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    JOB_CLASS_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    action: str
    job_class: str
    author: str
    at: _timestamp_pb2.Timestamp
    reason: str
    until: _timestamp_pb2.Timestamp
    def __init__(self, action: _Optional[str] = ..., job_class: _Optional[str] = ..., author: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class KillClassRequest(_message.Message):
    __slots__ = ("job_class", "reason", "author", "until", "cancel_running", "request_id")
    JOB_CLASS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_RUNNING_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job_class: str
    reason: str
    author: str
    until: _timestamp_pb2.Timestamp
    cancel_running: bool
    request_id: str
    def __init__(self, job_class: _Optional[str] = ..., reason: _Optional[str] = ..., author: _Optional[str] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_running: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class KillClassResponse(_message.Message):
    __slots__ = ("kill", "cancelled_runs")
    KILL_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_RUNS_FIELD_NUMBER: _ClassVar[int]
    kill: KillSwitch
    cancelled_runs: int
    def __init__(self, kill: _Optional[_Union[KillSwitch, _Mapping]] = ..., cancelled_runs: _Optional[int] = ...) -> None: ...

class ReviveClassRequest(_message.Message):
    __slots__ = ("job_class", "author", "request_id")
    JOB_CLASS_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job_class: str
    author: str
    request_id: str
    def __init__(self, job_class: _Optional[str] = ..., author: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ReviveClassResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListKillsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListKillsResponse(_message.Message):
    __slots__ = ("active", "audit", "read")
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    AUDIT_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    active: _containers.RepeatedCompositeFieldContainer[KillSwitch]
    audit: _containers.RepeatedCompositeFieldContainer[KillRecord]
    read: _common_pb2.ReadInfo
    def __init__(self, active: _Optional[_Iterable[_Union[KillSwitch, _Mapping]]] = ..., audit: _Optional[_Iterable[_Union[KillRecord, _Mapping]]] = ..., read: _Optional[_Union[_common_pb2.ReadInfo, _Mapping]] = ...) -> None: ...

class Alert(_message.Message):
    __slots__ = ("id", "kind", "job_id", "owner", "job_class", "scheduled_at", "message", "created_at", "delivered_at", "count", "last_scheduled_at", "open", "since")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    JOB_CLASS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_AT_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    job_id: str
    owner: str
    job_class: str
    scheduled_at: _timestamp_pb2.Timestamp
    message: str
    created_at: _timestamp_pb2.Timestamp
    delivered_at: _timestamp_pb2.Timestamp
    count: int
    last_scheduled_at: _timestamp_pb2.Timestamp
    open: bool
    since: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., job_id: _Optional[str] = ..., owner: _Optional[str] = ..., job_class: _Optional[str] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., message: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., delivered_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., count: _Optional[int] = ..., last_scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., open: _Optional[bool] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListAlertsRequest(_message.Message):
    __slots__ = ("pending_only", "owner", "limit")
    PENDING_ONLY_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    pending_only: bool
    owner: str
    limit: int
    def __init__(self, pending_only: _Optional[bool] = ..., owner: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListAlertsResponse(_message.Message):
    __slots__ = ("alerts", "pending", "read")
    ALERTS_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    alerts: _containers.RepeatedCompositeFieldContainer[Alert]
    pending: int
    read: _common_pb2.ReadInfo
    def __init__(self, alerts: _Optional[_Iterable[_Union[Alert, _Mapping]]] = ..., pending: _Optional[int] = ..., read: _Optional[_Union[_common_pb2.ReadInfo, _Mapping]] = ...) -> None: ...
