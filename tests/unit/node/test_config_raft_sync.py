"""The raft.sync and raft.elect_when_leader_exits settings: on unless turned off, and only booleans."""

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


def test_electing_when_the_leader_exits_is_on_by_default_and_can_be_turned_off(tmp_path):
    assert load(tmp_path, "").raft_settings().tuning.elect_when_leader_exits is True
    assert load(tmp_path, "raft: {elect_when_leader_exits: false}\n").raft.elect_when_leader_exits is False


def test_electing_when_the_leader_exits_must_be_a_boolean(tmp_path):
    with pytest.raises(ConfigError, match="raft.elect_when_leader_exits must be true or false"):
        load(tmp_path, "raft: {elect_when_leader_exits: 'soon'}\n")
