"""Text from callers, made harmless where it is stored and where it is shown.

    stored_text("ok\\x1b]0;pwned\\x07")   -> "ok\\ufffd]0;pwned\\ufffd"   (newlines and tabs kept)
    shown_text("line one\\nFAKE LINE")     -> "line one\\\\nFAKE LINE"     (one line, visible escapes)

A worker's `error` and `output_tail` come from whatever its handler printed: escape sequences
there set an operator's terminal title or colours when `raftcron runs` prints them, and a newline
in a logged alert starts a line that looks like the node's own. `stored_text` runs once, at the
RPC boundary, before the text reaches a command: every replica stores the cleaned text.
`shown_text` runs where text meets a terminal or a log line (the CLI's tables, the node's log
formatters), so text stored before this rule, or reaching a printer some other way, is
escaped too; `json_line` does the same for a JSON log line without changing what it decodes to. Both are one `str.translate`: linear in the text.
"""

from __future__ import annotations

# C0 controls, DEL and C1 controls: the characters terminals act on instead of printing.
_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
# Unicode's bidirectional overrides and isolates reorder what a terminal shows ("Trojan Source").
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]

_STORED = {code: "\ufffd" for code in _CONTROLS if code not in (0x09, 0x0A)}
_SHOWN = {code: f"\\x{code:02x}" for code in _CONTROLS} | {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_SHOWN |= {code: f"\\u{code:04x}" for code in _BIDI}
# json.dumps escapes C0 controls itself; the rest, written as JSON escapes, decode to the same value.
_JSON = {code: f"\\u{code:04x}" for code in [0x7F, *range(0x80, 0xA0), *_BIDI]}


def stored_text(text: str) -> str:
    """Caller text as replicated state keeps it: controls but newline and tab become U+FFFD."""
    return text.translate(_STORED)


def shown_text(text: str) -> str:
    """Text for one terminal line or log line: every control (newlines too) as a visible escape."""
    return text.translate(_SHOWN)


def json_line(text: str) -> str:
    """JSON text (from json.dumps) with no raw terminal control left: the same JSON value."""
    return text.translate(_JSON)
