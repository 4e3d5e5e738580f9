"""What a node refuses to start with: the cluster secret, its key per cluster, and the gRPC
security rules (loopback included)."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path

import pytest
from cryptography.fernet import InvalidToken
from pysyncobj.encryptor import getEncryptor

from scheduler.config import (
    ConfigError,
    NodeConfig,
    Peer,
    add_node_flags,
    insecure_warning,
    load_node_config,
    raft_password,
    serving_refusal,
    with_generated_secret,
)

SECRET = "0123456789abcdef0123456789abcdef-secret"


def peers(host: str) -> tuple[Peer, ...]:
    return tuple(Peer(f"n{i}", f"{host}:{7100 + i}", f"{host}:{7200 + i}") for i in (1, 2, 3))


def config(host: str = "10.0.0.1", **fields) -> NodeConfig:
    return NodeConfig(node_id="n1", peers=peers(host), data_dir=Path("/tmp/x"), **fields)


TLS = {"tls_cert_file": "node.pem", "tls_key_file": "node.key", "tls_ca_file": "ca.pem"}


def test_a_loopback_node_serves_with_a_secret_and_tokens_too():
    # Loopback is shared by every user of the machine: no exception for it.
    assert "without a cluster secret" in serving_refusal(config("127.0.0.1"))
    assert "without bearer tokens" in serving_refusal(config("127.0.0.1", cluster_secret=SECRET))
    assert serving_refusal(config("127.0.0.1", cluster_secret=SECRET, principals_file="p.yaml")) is None
    # Tokens over plaintext stay allowed on loopback (nobody else sees its traffic without root).
    assert config("127.0.0.1", cluster_secret=SECRET, principals_file="p.yaml").tls_files() is None


def test_insecure_is_an_explicit_choice_and_says_so():
    lax = config("127.0.0.1", cluster_secret=SECRET, insecure=True)
    assert serving_refusal(lax) is None and lax.insecure_grpc
    assert insecure_warning(lax) == "insecure: gRPC without tokens; anyone on this machine can call every RPC"
    exposed = config(cluster_secret=SECRET, insecure=True)
    assert (
        insecure_warning(exposed)
        == "insecure: gRPC without tokens; anyone who can reach 10.0.0.1:7201 can call every RPC"
    )
    # insecure does not lift the secret: a node without one runs any pickle it is sent.
    assert "without a cluster secret" in serving_refusal(config("127.0.0.1", insecure=True))
    with pytest.raises(ConfigError, match="without a cluster secret"):
        config(insecure=True)


def test_cluster_secret_is_mandatory_off_loopback_and_at_least_32_characters():
    with pytest.raises(ConfigError, match="without a cluster secret"):
        config(principals_file="p.yaml", **TLS)
    for short in ("short", "0123456789abcdef", "x" * 31):
        with pytest.raises(ConfigError, match="at least 32 characters"):
            config(cluster_secret=short, principals_file="p.yaml", **TLS)
    assert config(cluster_secret="x" * 32, principals_file="p.yaml", **TLS).cluster_secret == "x" * 32


def test_the_raft_key_is_derived_per_cluster():
    password = config(cluster_secret=SECRET, insecure=True).raft_settings().password
    assert password == raft_password(SECRET, "raftcron") != SECRET
    other_name = config(cluster_secret=SECRET, insecure=True, cluster_name="staging").raft_settings().password
    other_secret = config(cluster_secret=SECRET + "2", insecure=True).raft_settings().password
    assert len({password, other_name, other_secret}) == 3
    # Two clusters sharing a secret but not a name cannot read each other's Raft messages.
    token = getEncryptor(password).encrypt(b"append_entries")
    assert getEncryptor(password).decrypt(token) == b"append_entries"
    with pytest.raises(InvalidToken):
        getEncryptor(other_name).decrypt(token)
    with pytest.raises(ConfigError, match="cluster_name"):
        config(cluster_secret=SECRET, insecure=True, cluster_name="")
    with pytest.raises(ConfigError, match="cluster_name"):
        config(cluster_secret=SECRET, insecure=True, cluster_name="has space")


def one_node(tmp_path: Path, host: str = "127.0.0.1", **fields) -> NodeConfig:
    peer = Peer("n1", f"{host}:7101", f"{host}:7201")
    return NodeConfig(node_id="n1", peers=(peer,), data_dir=tmp_path / "data", **fields)


def test_a_one_node_loopback_cluster_generates_its_secret_once(tmp_path):
    generated, path = with_generated_secret(one_node(tmp_path, insecure=True))
    assert path == tmp_path / "data" / "cluster.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(generated.cluster_secret) >= 32 and path.read_text().strip() == generated.cluster_secret
    again, _ = with_generated_secret(one_node(tmp_path, insecure=True))
    assert again.cluster_secret == generated.cluster_secret  # a restart keeps its key
    path.chmod(0o640)
    with pytest.raises(ConfigError, match="readable by others"):
        with_generated_secret(one_node(tmp_path))


def test_no_secret_is_generated_where_it_cannot_work(tmp_path):
    # Several members must share one; a configured one is kept.
    three = NodeConfig(node_id="n1", peers=peers("127.0.0.1"), data_dir=tmp_path / "data", insecure=True)
    assert with_generated_secret(three) == (three, None)
    assert "must share one" in serving_refusal(three)
    configured = one_node(tmp_path, cluster_secret=SECRET)
    assert with_generated_secret(configured) == (configured, None)
    assert not (tmp_path / "data" / "cluster.secret").exists()


def test_grpc_off_loopback_needs_tls_and_tokens():
    with pytest.raises(ConfigError, match="without TLS and bearer tokens"):
        config(cluster_secret=SECRET)
    with pytest.raises(ConfigError, match="without TLS and bearer tokens"):
        config(cluster_secret=SECRET, **TLS)  # TLS but anyone may call
    with pytest.raises(ConfigError, match="without TLS and bearer tokens"):
        config(cluster_secret=SECRET, principals_file="p.yaml")  # tokens in clear text
    assert config(cluster_secret=SECRET, principals_file="p.yaml", **TLS).tls_files().cert_file == "node.pem"


def test_insecure_lets_grpc_off_loopback_run_without_tls_or_tokens():
    assert serving_refusal(config(cluster_secret=SECRET, insecure=True)) is None


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
        "/etc/rc/node.pem",
        "/etc/rc/node.key",
        "/etc/rc/ca.pem",
        True,
    )
    assert loaded.principals_file == "/etc/rc/principals.yaml"
    env = {
        "RAFTCRON_CLUSTER_SECRET": SECRET,
        "RAFTCRON_TLS_CERT_FILE": "/env/node.pem",
        "RAFTCRON_TLS_CLIENT_AUTH": "no",
    }
    loaded = load_node_config(parse(["--config", str(path), "--principals-file", "/flag/p.yaml"]), env)
    assert loaded.tls_cert_file == "/env/node.pem" and not loaded.tls_client_auth
    assert loaded.principals_file == "/flag/p.yaml"


def test_loader_refuses_unknown_tls_keys(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text("node_id: n1\ndata_dir: /tmp/x\npeers: ['n1=127.0.0.1:7101/127.0.0.1:7201']\ntls: {cert: x}\n")
    with pytest.raises(ConfigError, match="tls takes"):
        load_node_config(parse(["--config", str(path)]), {})


def test_loader_reads_insecure_its_older_name_and_the_cluster_name(tmp_path):
    path = tmp_path / "node.yaml"
    base = "node_id: n1\ndata_dir: /tmp/x\npeers: ['n1=127.0.0.1:7101/127.0.0.1:7201']\n"
    path.write_text(base)
    loaded = load_node_config(parse(["--config", str(path)]), {"RAFTCRON_CLUSTER_SECRET": SECRET})
    assert (loaded.insecure, loaded.cluster_name) == (False, "raftcron")
    path.write_text(base + "insecure: true\ncluster_name: prod-eu\n")
    loaded = load_node_config(parse(["--config", str(path)]), {"RAFTCRON_CLUSTER_SECRET": SECRET})
    assert (loaded.insecure, loaded.cluster_name) == (True, "prod-eu")
    path.write_text(base + "insecure_grpc: true\n")
    assert load_node_config(parse(["--config", str(path)]), {}).insecure
    path.write_text(base)
    env = {"RAFTCRON_INSECURE": "yes", "RAFTCRON_CLUSTER_NAME": "staging"}
    loaded = load_node_config(parse(["--config", str(path)]), env)
    assert (loaded.insecure, loaded.cluster_name) == (True, "staging")


def test_a_dashboard_off_loopback_needs_tokens_or_an_explicit_choice():
    loopback = {"cluster_secret": SECRET, "principals_file": "p.yaml", **TLS}
    with pytest.raises(ConfigError, match="dashboard on 0.0.0.0:9100 without bearer tokens"):
        config("127.0.0.1", cluster_secret=SECRET, metrics_address="0.0.0.0:9100")
    with pytest.raises(ConfigError, match="dashboard on 10.0.0.1:9100"):
        config(cluster_secret=SECRET, insecure=True, metrics_address="10.0.0.1:9100")
    assert config("127.0.0.1", metrics_address="127.0.0.1:9100").metrics_address  # loopback: fine
    assert config(metrics_address="10.0.0.1:9100", **loopback).principals_file  # tokens: fine
    assert config(
        "127.0.0.1", cluster_secret=SECRET, metrics_address="0.0.0.0:9100", insecure_dashboard=True
    ).insecure_dashboard


def test_insecure_dashboard_is_read_from_the_file_and_env(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text(
        "node_id: n1\ndata_dir: /tmp/x\npeers: ['n1=127.0.0.1:7101/127.0.0.1:7201', "
        "'n2=127.0.0.1:7102/127.0.0.1:7202', 'n3=127.0.0.1:7103/127.0.0.1:7203']\nmetrics: 0.0.0.0:9100\n"
    )
    env = {"RAFTCRON_CLUSTER_SECRET": SECRET}
    with pytest.raises(ConfigError, match="insecure_dashboard: true"):
        load_node_config(parse(["--config", str(path)]), env)
    assert load_node_config(
        parse(["--config", str(path)]), {**env, "RAFTCRON_INSECURE_DASHBOARD": "true"}
    ).insecure_dashboard
    path.write_text(path.read_text() + "insecure_dashboard: true\n")
    assert load_node_config(parse(["--config", str(path)]), env).insecure_dashboard
