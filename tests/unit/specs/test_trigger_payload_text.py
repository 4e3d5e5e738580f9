"""A trigger's payload arrives as JSON text in any layout and is stored canonical, or refused."""

from __future__ import annotations

import pytest

from scheduler.specs.payload import canonical_payload_text


def test_any_layout_is_stored_canonical() -> None:
    assert canonical_payload_text('{ "b": [1, 2],\n "a": "é" }') == '{"a":"\\u00e9","b":[1,2]}'
    assert canonical_payload_text("") == ""


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("{bad", "payload is not JSON"),
        ('{"x": NaN}', "payload"),
        ("[" * 100 + "]" * 100, "deeper"),
        ('"' + "x" * 70_000 + '"', "64 KiB"),
    ],
)
def test_what_may_not_be_a_payload_is_refused_with_the_reason(text: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        canonical_payload_text(text)
