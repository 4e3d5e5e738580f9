"""docker-compose.yml runs gRPC with TLS and tokens: each node and the worker get the credentials
`raftcron credentials` makes, as compose secrets, and the effective node config has them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler.security.devcerts import ensure_dev_credentials
from scheduler.security.policy import lease_denial, method_denial
from scheduler.security.principals import Authenticator
from tests.unit.project.test_compose import COMPOSE_PATH, ROOT, _command, _effective_config, _environment

SECRETS_DIR = "/run/secrets/"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_PATH.read_text())


def granted(service: dict) -> set[str]:
    return {s if isinstance(s, str) else s["source"] for s in service.get("secrets", [])}


def mounted(service: dict, path: str) -> str:
    """The compose secret a /run/secrets/ path refers to, checking the service is granted it."""
    assert path.startswith(SECRETS_DIR), path
    name = path.removeprefix(SECRETS_DIR)
    assert name in granted(service), f"{name} is not granted"
    return name


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """What `raftcron credentials deploy/credentials --host n1 --host n2 --host n3` writes."""
    return ensure_dev_credentials(tmp_path_factory.mktemp("deploy") / "credentials", ("n1", "n2", "n3"))


def secret_file(compose: dict, name: str, made) -> Path:
    """The file `made` holds for compose secret `name` (the compose file names it under deploy/credentials)."""
    path = Path(compose["secrets"][name]["file"])
    assert path.parent == Path("deploy/credentials"), path
    return made.directory / path.name


def test_every_node_serves_tls_with_tokens(compose, tmp_path, made):
    secret = tmp_path / "cluster_secret"
    secret.write_text("compose-test-secret-0123456789abcdef")
    nodes = {n: s for n, s in compose["services"].items() if _command(s)[:1] == ["serve"]}
    for name, service in nodes.items():
        config = _effective_config(service, secret)
        assert not config.insecure_grpc
        tls = config.tls_files()
        for path, expected in (
            (tls.cert_file, "node.pem"),
            (tls.key_file, "node.key"),
            (tls.ca_file, "ca.pem"),
            (config.principals_file, "principals.yaml"),
        ):
            assert secret_file(compose, mounted(service, path), made).name == expected
        # The health check (`raftcron status`) reads the CA and a token allowed to call Status.
        env = _environment(service)
        assert mounted(service, env["RAFTCRON_CA"]) == mounted(service, tls.ca_file)
        token = secret_file(compose, mounted(service, env["RAFTCRON_TOKEN_FILE"]), made).read_text()
        principal = Authenticator.from_file(made.path("principals.yaml")).authenticate(token)
        assert method_denial(principal, "/raftcron.v1.ClusterService/Status") is None
        assert principal.role == "reader", "a health check needs no more than reading"


def test_the_worker_gets_a_worker_token_and_the_ca_only(compose, made):
    worker = compose["services"]["worker"]
    env = _environment(worker)
    assert granted(worker) == {mounted(worker, env["RAFTCRON_CA"]), mounted(worker, env["RAFTCRON_TOKEN_FILE"])}
    token = secret_file(compose, mounted(worker, env["RAFTCRON_TOKEN_FILE"]), made).read_text()
    principal = Authenticator.from_file(made.path("principals.yaml")).authenticate(token)
    assert principal.role == "worker" and "--shell" in _command(worker)
    assert lease_denial(principal, ["shell"]) is None


def test_the_node_certificate_names_the_compose_hosts_and_the_published_loopback(made):
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(Path(made.path("node.pem")).read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"n1", "n2", "n3", "localhost"} <= set(sans.get_values_for_type(x509.DNSName))
    assert "127.0.0.1" in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}


def test_credentials_stay_out_of_git():
    ignored = (ROOT / "deploy" / "credentials" / ".gitignore").read_text().split()
    for name in ("node.key", "principals.yaml", "admin.token", "worker.token", "reader.token", "submitter.token"):
        assert name in ignored
