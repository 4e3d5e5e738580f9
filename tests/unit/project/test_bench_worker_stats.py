"""A bench worker appends what is new each second; the fleet reads the merged whole."""

from __future__ import annotations

from bench._harness.benchworker import Stats, read_stats


def test_dumps_append_only_what_is_new_and_read_back_merged(tmp_path):
    path = tmp_path / "w1.jsonl"
    stats = Stats()
    stats.completes_ok += [1.0, 2.0]
    stats.handler_starts.append(0.5)
    stats.dump(path, {"active": 3})
    stats.completes_ok.append(3.0)
    stats.completes_other = 2
    stats.leases.append((0.1, 0.2, 8, 8))
    stats.dump(path, {"active": 0, "stopped_at": 9.0})
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and "1.0" not in lines[1]  # the second dump holds only the new entries
    merged = read_stats(path)
    assert merged["completes_ok"] == [1.0, 2.0, 3.0]
    assert merged["handler_starts"] == [0.5]
    assert merged["leases"] == [[0.1, 0.2, 8, 8]]
    assert (merged["completes_other"], merged["active"], merged["stopped_at"]) == (2, 0, 9.0)


def test_a_line_still_being_written_is_left_for_the_next_read(tmp_path):
    path = tmp_path / "w1.jsonl"
    stats = Stats()
    stats.completes_ok.append(1.0)
    stats.dump(path, {})
    with path.open("a") as out:
        out.write('{"completes_ok": [2.0')
    assert read_stats(path)["completes_ok"] == [1.0]
