"""The log-format table and the core's cluster-version rules."""

from __future__ import annotations

import typing

import msgspec
import pytest

from scheduler.core.codec import (
    NewerLogFormat,
    decode_command,
    decode_snapshot,
    encode_command,
    encode_snapshot,
    state_digest,
)
from scheduler.core.commands import Command, ReadBarrier, SetClusterVersion
from scheduler.core.log_format import (
    BASE_LOG_FORMAT,
    COMMAND_LOG_FORMATS,
    FIELD_LOG_FORMATS,
    LOG_FORMAT,
    SNAPSHOT_LOG_FORMATS,
    field_carriers,
    later_fields_format,
    required_log_format,
)
from scheduler.core.results import ClusterVersionRaised
from scheduler.core.state import State
from tests.fakes import Core


def test_every_command_type_has_a_log_format() -> None:
    missing = sorted(t.__name__ for t in typing.get_args(Command) if t not in COMMAND_LOG_FORMATS)
    assert not missing, f"give {missing} the log format that introduces them in COMMAND_LOG_FORMATS"


def test_formats_are_within_what_this_code_reads() -> None:
    for table in (COMMAND_LOG_FORMATS, FIELD_LOG_FORMATS, SNAPSHOT_LOG_FORMATS):
        assert all(BASE_LOG_FORMAT <= version <= LOG_FORMAT for version in table.values())
    for kind, name in FIELD_LOG_FORMATS:
        assert name in kind.__struct_fields__, f"{kind.__name__}.{name} is not a field"


def test_set_cluster_version_needs_the_format_it_sets() -> None:
    assert required_log_format(ReadBarrier(1)) == 1
    assert required_log_format(SetClusterVersion(1, version=2, epoch=1)) == 2
    assert required_log_format(SetClusterVersion(1, version=5, epoch=1)) == 5


def _leading_core() -> Core:
    core = Core()
    core.lead("n1", term=1)
    return core


def _raise_to(core: Core, version: int, epoch: int | None = None):
    return core.apply(SetClusterVersion(core.clock.tick(), version, core.state.epoch if epoch is None else epoch))


def test_the_cluster_version_starts_at_1_and_rises() -> None:
    core = _leading_core()
    assert core.state.cluster_version == 1
    result = _raise_to(core, 2)
    assert result.accepted and result.events == (ClusterVersionRaised(version=2, previous=1),)
    assert core.state.cluster_version == 2
    # The same version again (a new leader that had not seen it applied) changes nothing.
    again = _raise_to(core, 2)
    assert again.accepted and again.events == () and core.state.cluster_version == 2


def test_the_cluster_version_never_falls_nor_passes_what_the_core_supports() -> None:
    core = _leading_core()
    _raise_to(core, 2)
    lower = _raise_to(core, 1)
    assert lower.rejection.code == "stale_cluster_version"
    above = _raise_to(core, LOG_FORMAT + 1)
    assert above.rejection.code == "unsupported_cluster_version"
    assert core.state.cluster_version == 2


def test_a_deposed_leader_cannot_raise_it() -> None:
    core = _leading_core()
    stale_epoch = core.state.epoch
    core.lead("n2", term=2)
    assert _raise_to(core, 2, epoch=stale_epoch).rejection.code == "stale_epoch"
    assert core.state.cluster_version == 1


def test_the_version_survives_a_snapshot_and_changes_the_digest() -> None:
    core = _leading_core()
    before = state_digest(core.state)
    _raise_to(core, 2)
    restored = decode_snapshot(encode_snapshot(core.state))
    assert restored.cluster_version == 2 and restored == core.state
    assert state_digest(core.state) != before


def test_an_old_snapshot_restores_at_version_1() -> None:
    assert decode_snapshot(encode_snapshot(State(applied_index=3))).cluster_version == 1


@pytest.mark.parametrize("cap", [1, 2])
def test_a_capped_decoder_reads_its_formats_only(cap: int) -> None:
    data = encode_snapshot(State(cluster_version=2))
    if cap == 1:
        with pytest.raises(ValueError, match="log format 2"):
            decode_snapshot(data, max_log_format=cap)
    else:
        assert decode_snapshot(data, max_log_format=cap).cluster_version == 2


# -- fields added later: UNSET until used, and found however deep --------------------------------


class _Inner(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    a: int = 0
    added: str | msgspec.UnsetType = msgspec.UNSET


class _InnerBefore(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    a: int = 0


class _Outer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: tuple[_Inner, ...] = ()
    by_name: dict[str, _Inner] = {}
    plain: int = 0


class _Unrelated(msgspec.Struct, frozen=True):
    x: int = 0


_TABLE = {(_Inner, "added"): 3}


def test_every_later_field_defaults_to_unset_so_entries_without_it_encode_as_before() -> None:
    for kind, name in FIELD_LOG_FORMATS:
        field = next(f for f in msgspec.structs.fields(kind) if f.name == name)
        assert field.default is msgspec.UNSET, f"declare {kind.__name__}.{name} as `T | UnsetType = UNSET`"


def test_an_unset_field_leaves_the_bytes_an_older_node_reads() -> None:
    encode = msgspec.msgpack.Encoder(order="deterministic").encode
    assert encode(_Inner(1)) == encode(_InnerBefore(1))
    assert msgspec.msgpack.decode(encode(_Inner(1)), type=_InnerBefore) == _InnerBefore(1)
    with pytest.raises(msgspec.ValidationError, match="unknown field `added`"):
        msgspec.msgpack.decode(encode(_Inner(1, added="x")), type=_InnerBefore)


def test_carriers_name_only_the_fields_that_can_reach_a_later_field() -> None:
    carriers = field_carriers(_TABLE, [_Outer, _Unrelated])
    assert carriers[_Outer] == ("items", "by_name")
    assert carriers[_Inner] == ("added",)
    assert carriers[_Unrelated] == ()


@pytest.mark.parametrize(
    ("value", "needed"),
    [
        (_Outer(), 1),
        (_Outer(items=(_Inner(1), _Inner(2))), 1),
        (_Outer(items=(_Inner(1), _Inner(2, added=""))), 3),  # set, even to an empty value
        (_Outer(by_name={"k": _Inner(added="x")}), 3),
        (_Outer(plain=5), 1),
    ],
)
def test_a_later_field_set_anywhere_inside_a_command_raises_the_format_it_needs(value, needed) -> None:
    carriers = field_carriers(_TABLE, [_Outer])
    assert later_fields_format(value, _TABLE, carriers, 1) == needed


def test_no_command_or_field_needs_a_format_above_the_newest_this_code_reads():
    """decode_command skips the walk of an entry's fields on a node that reads LOG_FORMAT: it
    holds only while nothing this code decodes needs more."""
    assert max(COMMAND_LOG_FORMATS.values()) <= LOG_FORMAT
    assert max(FIELD_LOG_FORMATS.values()) <= LOG_FORMAT


def test_a_cluster_version_above_what_this_node_reads_is_refused_at_decode():
    """The decode skips the walk of fields on a node that reads LOG_FORMAT; a version to hold is
    a value, which that walk never covered: it is still refused."""
    newer = encode_command(SetClusterVersion(issued_at_us=1, version=LOG_FORMAT + 1, epoch=1))
    with pytest.raises(NewerLogFormat):
        decode_command(newer)
    assert (
        decode_command(encode_command(SetClusterVersion(issued_at_us=1, version=LOG_FORMAT, epoch=1))).version
        == LOG_FORMAT
    )
