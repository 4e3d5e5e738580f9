"""The raft.sync setting: on unless turned off, and only a boolean."""

from __future__ import annotations

import argparse

import pytest

from scheduler.config import ConfigError, add_node_flags, load_node_config

PEERS = "peers: ['n1=127.0.0.1:7101/127.0.0.1:7201']\n"


def load(tmp_path, raft: str):
    path = tmp_path / "node.yaml"
    path.write_text(f"node_id: n1\ndata_dir: {tmp_path}\n{PEERS}{raft}")
    parser = argparse.ArgumentParser()
    add_node_flags(parser)
    return load_node_config(parser.parse_args(["--config", str(path)]), {})


def test_sync_is_on_by_default(tmp_path):
    config = load(tmp_path, "")
    assert config.raft.sync is True and config.raft_settings().tuning.sync is True


def test_sync_can_be_turned_off(tmp_path):
    assert load(tmp_path, "raft: {sync: false}\n").raft.sync is False


def test_sync_must_be_a_boolean(tmp_path):
    with pytest.raises(ConfigError, match="raft.sync must be true or false.*power loss"):
        load(tmp_path, "raft: {sync: 'sometimes'}\n")
