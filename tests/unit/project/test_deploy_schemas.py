"""docker-compose.yml against the Compose specification's JSON schema, and deploy/kubernetes/
against the Kubernetes API schemas, both offline, plus what the schemas cannot see: that the
StatefulSet's peers, probes, Services and Secrets fit together and that the real config loader
accepts a node's environment.

The Compose schema is the one check-jsonschema ships (vendor/compose-spec.json, from the
compose-spec project); the Kubernetes schemas are the ones kubernetes-validate bundles.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from scheduler.cli.parser import build_parser
from scheduler.config import load_node_config

ROOT = Path(__file__).resolve().parents[3]
KUBERNETES_DIR = ROOT / "deploy" / "kubernetes"
# The oldest Kubernetes minor release still maintained when these manifests were written.
KUBERNETES_VERSION = "1.32.0"


def compose_schema() -> dict:
    return json.loads((resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json").read_text())


def test_docker_compose_yml_follows_the_compose_specification():
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    document = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    problems = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
    assert not problems, "\n".join(problems)


def test_the_compose_schema_refuses_a_misspelt_key():
    schema = compose_schema()
    document = {"services": {"n1": {"image": "raftcron:local", "healthcheck": {"intervall": "5s"}}}}
    assert list(jsonschema.validators.validator_for(schema)(schema).iter_errors(document))


@pytest.fixture(scope="module")
def manifests() -> dict[tuple[str, str], dict]:
    """(kind, name) -> document, from every YAML file of deploy/kubernetes/."""
    documents = {}
    for path in sorted(KUBERNETES_DIR.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                documents[(document["kind"], document["metadata"]["name"])] = document
    return documents


def test_every_manifest_is_valid_against_the_kubernetes_schemas(manifests):
    assert {kind for kind, _ in manifests} == {"StatefulSet", "Service", "PodDisruptionBudget", "Deployment"}
    for (kind, name), document in manifests.items():
        try:
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{kind}/{name}: {'.'.join(map(str, error.path))}: {error.message}")


def test_the_kubernetes_schemas_refuse_a_misspelt_field(manifests):
    broken = json.loads(json.dumps(manifests[("StatefulSet", "raftcron")]))
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = broken["spec"]["template"]["spec"][
        "containers"
    ][0].pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def _env(container: dict) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", []) if "value" in item}


def test_the_statefulset_names_its_peers_under_its_headless_service(manifests):
    nodes = manifests[("StatefulSet", "raftcron")]
    headless = manifests[("Service", "raftcron")]
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert nodes["spec"]["serviceName"] == "raftcron"
    assert nodes["spec"]["podManagementPolicy"] == "Parallel"
    replicas = nodes["spec"]["replicas"]
    assert replicas == 3
    container = nodes["spec"]["template"]["spec"]["containers"][0]
    peers = _env(container)["RAFTCRON_PEERS"].split(",")
    expected = [f"raftcron-{i}=raftcron-{i}.raftcron:7100/raftcron-{i}.raftcron:7200" for i in range(replicas)]
    assert peers == expected
    assert container["env"][0] == {
        "name": "RAFTCRON_NODE_ID",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
    }
    labels = nodes["spec"]["template"]["metadata"]["labels"]
    for kind, name in (("Service", "raftcron"), ("Service", "raftcron-http")):
        assert manifests[(kind, name)]["spec"]["selector"].items() <= labels.items()
    assert manifests[("PodDisruptionBudget", "raftcron")]["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": labels},
    }
    worker = manifests[("Deployment", "raftcron-worker")]["spec"]["template"]["spec"]["containers"][0]
    assert _env(worker)["RAFTCRON_CLUSTER"] == ",".join(f"raftcron-{i}.raftcron:7200" for i in range(replicas))


def test_the_probes_are_healthz_and_readyz_on_the_http_port(manifests):
    container = manifests[("StatefulSet", "raftcron")]["spec"]["template"]["spec"]["containers"][0]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert _env(container)["RAFTCRON_METRICS"] == f"0.0.0.0:{ports['http']}"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["resources"]["requests"].keys() == {"cpu", "memory"}


def test_credentials_are_files_of_the_mounted_secrets(manifests):
    for kind, name in (("StatefulSet", "raftcron"), ("Deployment", "raftcron-worker")):
        pod = manifests[(kind, name)]["spec"]["template"]["spec"]
        container = pod["containers"][0]
        mount = next(m for m in container["volumeMounts"] if m["name"] == "credentials")
        assert mount["readOnly"] is True
        assert next(v for v in pod["volumes"] if v["name"] == "credentials")["secret"]["secretName"]
        for key, value in _env(container).items():
            if key.endswith("_FILE") or key == "RAFTCRON_CA":
                assert value.startswith(mount["mountPath"] + "/"), f"{name}: {key}={value}"
            assert "SECRET" not in key or key.endswith("_FILE"), f"{name}: {key} holds a secret value"


def test_the_real_config_loader_accepts_a_node_of_the_statefulset(manifests, tmp_path):
    container = manifests[("StatefulSet", "raftcron")]["spec"]["template"]["spec"]["containers"][0]
    environ = {**_env(container), "RAFTCRON_NODE_ID": "raftcron-1"}
    secret = tmp_path / "cluster.secret"
    secret.write_text("kubernetes-test-secret-0123456789abcdef\n")
    environ["RAFTCRON_CLUSTER_SECRET_FILE"] = str(secret)
    config = load_node_config(build_parser().parse_args(container["args"]), environ)
    assert config.me.grpc_address == "raftcron-1.raftcron:7200"
    assert config.metrics_address == "0.0.0.0:7300"
    assert [peer.node_id for peer in config.peers] == ["raftcron-0", "raftcron-1", "raftcron-2"]
