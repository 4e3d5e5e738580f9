"""The pure replicated state machine: commands in, past-tense events out; no clock, no I/O."""

from scheduler.core.apply import apply
from scheduler.core.codec import (
    CodecError,
    decode_command,
    decode_snapshot,
    encode_command,
    encode_snapshot,
    state_digest,
)
from scheduler.core.commands import Command
from scheduler.core.results import Rejection, Result
from scheduler.core.state import State

__all__ = [
    "apply",
    "CodecError",
    "Command",
    "decode_command",
    "decode_snapshot",
    "encode_command",
    "encode_snapshot",
    "Rejection",
    "Result",
    "State",
    "state_digest",
]
