import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Member(_message.Message):
    __slots__ = ("node_id", "raft_address", "grpc_address")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raft_address: str
    grpc_address: str
    def __init__(self, node_id: _Optional[str] = ..., raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ...) -> None: ...

class AddMemberRequest(_message.Message):
    __slots__ = ("member", "author", "request_id")
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    member: Member
    author: str
    request_id: str
    def __init__(self, member: _Optional[_Union[Member, _Mapping]] = ..., author: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class RemoveMemberRequest(_message.Message):
    __slots__ = ("node_id", "author", "request_id")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    author: str
    request_id: str
    def __init__(self, node_id: _Optional[str] = ..., author: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class MembershipResponse(_message.Message):
    __slots__ = ("members", "index", "changed")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    index: int
    changed: bool
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., index: _Optional[int] = ..., changed: _Optional[bool] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("include_digest",)
    INCLUDE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    include_digest: bool
    def __init__(self, include_digest: _Optional[bool] = ...) -> None: ...

class PeerStatus(_message.Message):
    __slots__ = ("node_id", "raft_address", "grpc_address", "connected", "match_index", "next_index")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    MATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    NEXT_INDEX_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raft_address: str
    grpc_address: str
    connected: bool
    match_index: int
    next_index: int
    def __init__(self, node_id: _Optional[str] = ..., raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ..., connected: _Optional[bool] = ..., match_index: _Optional[int] = ..., next_index: _Optional[int] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("node_id", "role", "leader", "leader_grpc_address", "term", "commit_index", "applied_index", "epoch", "peers", "ready", "raft_voters", "replicated_time", "job_count", "run_count", "state_digest", "digest_index", "cluster_version", "log_format", "voter_log_formats", "halted", "herd_window")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    RAFT_VOTERS_FIELD_NUMBER: _ClassVar[int]
    REPLICATED_TIME_FIELD_NUMBER: _ClassVar[int]
    JOB_COUNT_FIELD_NUMBER: _ClassVar[int]
    RUN_COUNT_FIELD_NUMBER: _ClassVar[int]
    STATE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    DIGEST_INDEX_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_VERSION_FIELD_NUMBER: _ClassVar[int]
    LOG_FORMAT_FIELD_NUMBER: _ClassVar[int]
    VOTER_LOG_FORMATS_FIELD_NUMBER: _ClassVar[int]
    HALTED_FIELD_NUMBER: _ClassVar[int]
    HERD_WINDOW_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    role: str
    leader: str
    leader_grpc_address: str
    term: int
    commit_index: int
    applied_index: int
    epoch: int
    peers: _containers.RepeatedCompositeFieldContainer[PeerStatus]
    ready: bool
    raft_voters: _containers.RepeatedScalarFieldContainer[str]
    replicated_time: _timestamp_pb2.Timestamp
    job_count: int
    run_count: int
    state_digest: str
    digest_index: int
    cluster_version: int
    log_format: int
    voter_log_formats: _containers.RepeatedCompositeFieldContainer[VoterLogFormat]
    halted: str
    herd_window: _duration_pb2.Duration
    def __init__(self, node_id: _Optional[str] = ..., role: _Optional[str] = ..., leader: _Optional[str] = ..., leader_grpc_address: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., epoch: _Optional[int] = ..., peers: _Optional[_Iterable[_Union[PeerStatus, _Mapping]]] = ..., ready: _Optional[bool] = ..., raft_voters: _Optional[_Iterable[str]] = ..., replicated_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., job_count: _Optional[int] = ..., run_count: _Optional[int] = ..., state_digest: _Optional[str] = ..., digest_index: _Optional[int] = ..., cluster_version: _Optional[int] = ..., log_format: _Optional[int] = ..., voter_log_formats: _Optional[_Iterable[_Union[VoterLogFormat, _Mapping]]] = ..., halted: _Optional[str] = ..., herd_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class VoterLogFormat(_message.Message):
    __slots__ = ("node_id", "raft_address", "log_format")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LOG_FORMAT_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raft_address: str
    log_format: int
    def __init__(self, node_id: _Optional[str] = ..., raft_address: _Optional[str] = ..., log_format: _Optional[int] = ...) -> None: ...
