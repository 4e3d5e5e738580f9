"""What a node refuses to start with: the cluster secret and the gRPC security rules."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from scheduler.config import ConfigError, NodeConfig, Peer, add_node_flags, load_node_config

SECRET = "0123456789abcdef0123"


def peers(host: str) -> tuple[Peer, ...]:
    return tuple(Peer(f"n{i}", f"{host}:{7100 + i}", f"{host}:{7200 + i}") for i in (1, 2, 3))


def config(host: str = "10.0.0.1", **fields) -> NodeConfig:
    return NodeConfig(node_id="n1", peers=peers(host), data_dir=Path("/tmp/x"), **fields)


TLS = {"tls_cert_file": "node.pem", "tls_key_file": "node.key", "tls_ca_file": "ca.pem"}


def test_loopback_cluster_may_run_without_secret_tls_or_tokens():
    assert config("127.0.0.1").tls_files() is None


def test_cluster_secret_is_mandatory_off_loopback():
    with pytest.raises(ConfigError, match="without a cluster secret"):
        config(principals_file="p.yaml", **TLS)
    with pytest.raises(ConfigError, match="at least 16"):
        config(cluster_secret="short", principals_file="p.yaml", **TLS)


def test_grpc_off_loopback_needs_tls_and_tokens():
    with pytest.raises(ConfigError, match="without TLS and bearer tokens"):
        config(cluster_secret=SECRET)
    with pytest.raises(ConfigError, match="without TLS and bearer tokens"):
        config(cluster_secret=SECRET, **TLS)  # TLS but anyone may call
    with pytest.raises(ConfigError, match="without TLS and bearer tokens"):
        config(cluster_secret=SECRET, principals_file="p.yaml")  # tokens in clear text
    assert config(cluster_secret=SECRET, principals_file="p.yaml", **TLS).tls_files().cert_file == "node.pem"


def test_insecure_grpc_is_an_explicit_choice():
    assert config(cluster_secret=SECRET, insecure_grpc=True).insecure_grpc


def test_tls_settings_that_cannot_work_are_refused():
    with pytest.raises(ConfigError, match="go together"):
        config("127.0.0.1", tls_cert_file="node.pem")
    with pytest.raises(ConfigError, match="client_auth needs"):
        config("127.0.0.1", tls_cert_file="node.pem", tls_key_file="node.key", tls_client_auth=True)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_node_flags(parser)
    return parser.parse_args(argv)


def test_loader_reads_tls_and_principals_from_file_env_and_flags(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text(
        "node_id: n1\ndata_dir: /tmp/x\npeers: ['n1=10.0.0.1:7101/10.0.0.1:7201', 'n2=10.0.0.2:7101/10.0.0.2:7201',"
        " 'n3=10.0.0.3:7101/10.0.0.3:7201']\n"
        "tls: {cert_file: /etc/rc/node.pem, key_file: /etc/rc/node.key, ca_file: /etc/rc/ca.pem, client_auth: true}\n"
        "principals_file: /etc/rc/principals.yaml\n"
    )
    loaded = load_node_config(parse(["--config", str(path)]), {"RAFTCRON_CLUSTER_SECRET": SECRET})
    tls = loaded.tls_files()
    assert (tls.cert_file, tls.key_file, tls.ca_file, tls.require_client_cert) == (
        "/etc/rc/node.pem", "/etc/rc/node.key", "/etc/rc/ca.pem", True
    )
    assert loaded.principals_file == "/etc/rc/principals.yaml"
    env = {"RAFTCRON_CLUSTER_SECRET": SECRET, "RAFTCRON_TLS_CERT_FILE": "/env/node.pem", "RAFTCRON_TLS_CLIENT_AUTH": "no"}
    loaded = load_node_config(parse(["--config", str(path), "--principals-file", "/flag/p.yaml"]), env)
    assert loaded.tls_cert_file == "/env/node.pem" and not loaded.tls_client_auth
    assert loaded.principals_file == "/flag/p.yaml"


def test_loader_refuses_unknown_tls_keys(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text("node_id: n1\ndata_dir: /tmp/x\npeers: ['n1=127.0.0.1:7101/127.0.0.1:7201']\ntls: {cert: x}\n")
    with pytest.raises(ConfigError, match="tls takes"):
        load_node_config(parse(["--config", str(path)]), {})


def test_a_dashboard_off_loopback_needs_tokens_or_an_explicit_choice():
    loopback = {"cluster_secret": SECRET, "principals_file": "p.yaml", **TLS}
    with pytest.raises(ConfigError, match="dashboard on 0.0.0.0:9100 without bearer tokens"):
        config("127.0.0.1", cluster_secret=SECRET, metrics_address="0.0.0.0:9100")
    with pytest.raises(ConfigError, match="dashboard on 10.0.0.1:9100"):
        config(cluster_secret=SECRET, insecure_grpc=True, metrics_address="10.0.0.1:9100")
    assert config("127.0.0.1", metrics_address="127.0.0.1:9100").metrics_address  # loopback: fine
    assert config(metrics_address="10.0.0.1:9100", **loopback).principals_file  # tokens: fine
    assert config("127.0.0.1", cluster_secret=SECRET, metrics_address="0.0.0.0:9100", insecure_dashboard=True).insecure_dashboard


def test_insecure_dashboard_is_read_from_the_file_and_env(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text("node_id: n1\ndata_dir: /tmp/x\npeers: ['n1=127.0.0.1:7101/127.0.0.1:7201', "
                    "'n2=127.0.0.1:7102/127.0.0.1:7202', 'n3=127.0.0.1:7103/127.0.0.1:7203']\nmetrics: 0.0.0.0:9100\n")
    env = {"RAFTCRON_CLUSTER_SECRET": SECRET}
    with pytest.raises(ConfigError, match="insecure_dashboard: true"):
        load_node_config(parse(["--config", str(path)]), env)
    assert load_node_config(parse(["--config", str(path)]), {**env, "RAFTCRON_INSECURE_DASHBOARD": "true"}).insecure_dashboard
    path.write_text(path.read_text() + "insecure_dashboard: true\n")
    assert load_node_config(parse(["--config", str(path)]), env).insecure_dashboard
