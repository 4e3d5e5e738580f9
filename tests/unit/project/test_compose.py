"""The container setup: docker-compose.yml, the Dockerfile and .dockerignore.

No container engine is needed: the files' structure is checked, and each node's effective
settings go through the real argument parser and config loader, exactly as `raftcron serve`
would read them inside its container.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from scheduler.cli.parser import build_parser
from scheduler.config import ConfigError, NodeConfig, load_node_config

ROOT = Path(__file__).resolve().parents[3]
COMPOSE_PATH = ROOT / "docker-compose.yml"
DOCKERFILE_PATH = ROOT / "Dockerfile"
NODE_NAMES = ("n1", "n2", "n3")
SECRET_ENV = "RAFTCRON_CLUSTER_SECRET"
SECRET_FILE_ENV = "RAFTCRON_CLUSTER_SECRET_FILE"
TEST_SECRET = "compose-test-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def compose() -> dict:
    doc = yaml.safe_load(COMPOSE_PATH.read_text())
    assert isinstance(doc, dict) and isinstance(doc.get("services"), dict)
    return doc


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def nodes(services) -> dict:
    return {name: service for name, service in services.items() if _command(service)[:1] == ["serve"]}


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE_PATH.read_text())
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def _command(service: dict) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]


def _environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(key): "" if value is None else str(value) for key, value in env.items()}


def _effective_config(service: dict, secret_file: Path | None) -> NodeConfig:
    """What `raftcron serve` builds in the container: the service's command and environment,
    with the compose secret's mount point replaced by a local file holding a test secret."""
    args = build_parser().parse_args(_command(service))
    assert args.command == "serve"
    environ = _environment(service)
    if secret_file is None:
        environ.pop(SECRET_FILE_ENV, None)
    else:
        environ[SECRET_FILE_ENV] = str(secret_file)
    return load_node_config(args, environ)


@pytest.fixture(scope="module")
def configs(nodes, tmp_path_factory) -> dict[str, NodeConfig]:
    secret_file = tmp_path_factory.mktemp("secret") / "cluster_secret"
    secret_file.write_text(TEST_SECRET + "\n")
    return {name: _effective_config(service, secret_file) for name, service in nodes.items()}


# --- the nodes ----------------------------------------------------------------------------


def test_three_nodes_named_n1_to_n3(nodes):
    assert sorted(nodes) == list(NODE_NAMES)


def test_nodes_and_worker_come_from_the_one_image_the_dockerfile_builds(services):
    builds = []
    for name, service in services.items():
        build = service.get("build")
        assert build is not None, f"{name} is not built from the Dockerfile"
        if isinstance(build, str):
            build = {"context": build}
        builds.append((build.get("context"), build.get("dockerfile", "Dockerfile")))
        assert (ROOT / build.get("context", ".") / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE_PATH
    assert len(set(builds)) == 1
    assert len({service.get("image") for service in services.values()}) == 1


def test_the_real_config_loader_accepts_every_node(configs):
    for name, config in configs.items():
        assert isinstance(config, NodeConfig)
        assert config.node_id == name
        assert config.cluster_secret == TEST_SECRET


def test_node_ids_are_distinct_and_every_node_sees_the_same_peers(configs):
    assert len({config.node_id for config in configs.values()}) == len(NODE_NAMES)
    peer_sets = {frozenset(config.peers) for config in configs.values()}
    assert len(peer_sets) == 1
    (peers,) = peer_sets
    assert {peer.node_id for peer in peers} == set(NODE_NAMES)


def test_each_node_binds_its_own_service_name(configs, dockerfile):
    exposed = {port for keyword, rest in dockerfile if keyword == "EXPOSE" for port in rest.split()}
    for name, config in configs.items():
        raft_host, _, raft_port = config.me.raft_address.rpartition(":")
        grpc_host, _, grpc_port = config.me.grpc_address.rpartition(":")
        # The service name resolves inside the container to the container's own address.
        assert raft_host == grpc_host == name
        assert {raft_port, grpc_port} <= exposed


def test_data_dir_is_a_per_node_named_volume(compose, nodes, configs, dockerfile):
    declared_volumes = compose.get("volumes") or {}
    image_volumes = [rest for keyword, rest in dockerfile if keyword == "VOLUME"]
    sources = []
    for name, service in nodes.items():
        data_dir = str(configs[name].data_dir)
        assert any(data_dir in volume for volume in image_volumes)
        mounts = [v.split(":") if isinstance(v, str) else [v["source"], v["target"]] for v in service["volumes"]]
        matching = [source for source, target, *_ in mounts if target == data_dir]
        assert len(matching) == 1, f"{name}: no volume on its data dir {data_dir}"
        assert matching[0] in declared_volumes, f"{name}: {matching[0]} is not a named volume"
        sources.append(matching[0])
    assert len(set(sources)) == len(sources)


def test_nodes_refuse_to_start_without_the_secret(nodes):
    for service in nodes.values():
        with pytest.raises(ConfigError, match="cluster secret"):
            _effective_config(service, secret_file=None)


def test_healthcheck_asks_the_nodes_own_readiness_probe(nodes, configs):
    for name, service in nodes.items():
        test = service["healthcheck"]["test"]
        assert test[:4] == ["CMD", "python", "-m", "scheduler.observability.healthcheck"], name
        assert test[4] == f"http://127.0.0.1:{_port(configs[name].metrics_address)}/readyz"
        # The node listens on every interface of its container, 127.0.0.1 included.
        assert configs[name].metrics_address.startswith("0.0.0.0:")


def _port(address: str) -> str:
    return address.rpartition(":")[2]


def test_restart_policy_and_grace_period(services):
    for name, service in services.items():
        assert service.get("restart") == "unless-stopped", name
        assert re.fullmatch(r"\d+s", str(service.get("stop_grace_period", ""))), name


def test_grpc_and_http_are_published_and_only_on_loopback(nodes, configs):
    for name, service in nodes.items():
        published = set()
        for mapping in service.get("ports", []):
            host_ip, _, rest = str(mapping).partition(":")
            assert host_ip == "127.0.0.1", f"{name} publishes {mapping} beyond loopback"
            published.add(rest.rpartition(":")[2])
        config = configs[name]
        assert published == {_port(config.me.grpc_address), _port(config.metrics_address)}, name


def test_the_worker_has_no_health_check_of_a_node(services):
    assert services["worker"]["healthcheck"] == {"disable": True}


# --- the cluster secret -------------------------------------------------------------------


def test_secret_comes_from_a_compose_secret_file(compose, nodes):
    declared = compose.get("secrets") or {}
    for name, service in nodes.items():
        env = _environment(service)
        assert SECRET_ENV not in env, f"{name} puts the secret itself in its environment"
        path = env[SECRET_FILE_ENV]
        assert path.startswith("/run/secrets/")
        secret_name = path.removeprefix("/run/secrets/")
        granted = [s if isinstance(s, str) else s.get("source") for s in service.get("secrets", [])]
        assert secret_name in granted
        assert set(declared[secret_name]) == {"file"}, "the secret must be backed by a file"


def test_secret_file_is_kept_out_of_git_and_out_of_the_image(compose):
    for secret in (compose.get("secrets") or {}).values():
        path = (ROOT / secret["file"]).resolve()
        ignore = path.parent / ".gitignore"
        assert ignore.is_file() and path.name in ignore.read_text().split(), f"{path.name} is not git-ignored"
    dockerignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    assert "*" in dockerignore, ".dockerignore should allowlist what the image needs"
    assert not any(line.startswith("!deploy") for line in dockerignore)


def test_secret_is_never_on_a_command_line(services):
    for name, service in services.items():
        words = _command(service) + [str(w) for w in (service.get("healthcheck") or {}).get("test", [])]
        assert not any("secret" in word.lower() for word in words), f"{name}: {words}"


def test_no_plain_secret_values_in_the_compose_file(services):
    for name, service in services.items():
        for key, value in _environment(service).items():
            # A *_FILE variable names where a secret is mounted, never the secret itself.
            if re.search(r"SECRET|PASSWORD|TOKEN", key) and not key.endswith("_FILE"):
                pytest.fail(f"{name}: {key} holds a secret value in plain text")
            assert "$" not in value, f"{name}: {key} depends on interpolation; keep the file self-contained"


# --- the worker ---------------------------------------------------------------------------


def test_worker_is_behind_its_profile(services, nodes, configs):
    worker = services["worker"]
    assert worker.get("profiles") == ["worker"]
    assert _command(worker)[0] == "worker"
    assert all("profiles" not in service for service in nodes.values())
    # Workers speak gRPC only: they get the node addresses (and gRPC credentials), not the Raft secret.
    granted = [s if isinstance(s, str) else s.get("source") for s in worker.get("secrets", [])]
    assert "cluster_secret" not in granted
    cluster = set(_environment(worker)["RAFTCRON_CLUSTER"].split(","))
    assert cluster == {config.me.grpc_address for config in configs.values()}


# --- the Dockerfile -----------------------------------------------------------------------


def test_dockerfile_base_user_and_entrypoint(dockerfile):
    keywords = [keyword for keyword, _ in dockerfile]
    assert dockerfile[0] == ("FROM", "python:3.11-slim")
    users = [rest for keyword, rest in dockerfile if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert keywords.index("USER") > max(i for i, k in enumerate(keywords) if k == "RUN"), "USER before a RUN"
    assert [rest for keyword, rest in dockerfile if keyword == "ENTRYPOINT"] == ['["raftcron"]']
    checks = [rest for keyword, rest in dockerfile if keyword == "HEALTHCHECK"]
    assert len(checks) == 1 and "python -m scheduler.observability.healthcheck" in checks[0]
    assert "http://127.0.0.1:7300/readyz" in checks[0]


def test_dockerfile_serves_http_where_its_health_check_looks(dockerfile):
    exposed = {port for keyword, rest in dockerfile if keyword == "EXPOSE" for port in rest.split()}
    assert exposed == {"7100", "7200", "7300"}
    assert ("ENV", "RAFTCRON_METRICS=0.0.0.0:7300") in dockerfile


def test_dockerfile_installs_the_project_with_a_dependency_layer(dockerfile):
    copies = [rest for keyword, rest in dockerfile if keyword == "COPY"]
    runs = [rest for keyword, rest in dockerfile if keyword == "RUN"]
    first_source_copy = next(i for i, rest in enumerate(copies) if "scheduler" in rest)
    assert any("pyproject.toml" in rest for rest in copies[:first_source_copy])
    assert any("pip install" in rest and "requirements" in rest for rest in runs)
    assert any(re.search(r"pip install (--\S+ )*\.(\s|$)", rest) for rest in runs)
    assert any("-m 0700" in rest and "/var/lib/raftcron" in rest for rest in runs)


def test_dockerfile_holds_no_secret_material(dockerfile):
    for keyword, rest in dockerfile:
        if keyword in ("ENV", "ARG", "LABEL"):
            assert not re.search(r"SECRET|PASSWORD|TOKEN", rest, re.IGNORECASE), rest
        if keyword in ("COPY", "ADD"):
            assert "deploy" not in rest and ".secret" not in rest, rest
