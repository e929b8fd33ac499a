"""The Kubernetes manifests of deploy/kubernetes: valid against the API
schemas kubernetes-validate ships (strict: no unknown field), and wired as
docs/operations.md describes them (probes, drain, shared key, services)."""

from __future__ import annotations

from typing import Any

import yaml

from helpers import REPO

DEPLOY = REPO / "deploy" / "kubernetes"
K8S_VERSION = "1.37.0"


def manifests() -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


def test_manifests_validate() -> None:
    import kubernetes_validate

    docs = manifests()
    assert set(docs) == {("ConfigMap", "quiver"), ("Secret", "quiver"), ("StatefulSet", "quiver"),
                         ("Service", "quiver"), ("Service", "quiver-headless"), ("PodDisruptionBudget", "quiver")}
    for (kind, name), doc in docs.items():
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_manifests_wiring() -> None:
    docs = manifests()
    pod = docs[("StatefulSet", "quiver")]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["terminationGracePeriodSeconds"] > 30, "longer than the server's 30 s drain"
    assert c["resources"]["requests"]["memory"] and c["resources"]["limits"]["memory"]
    config = yaml.safe_load(docs[("ConfigMap", "quiver")]["data"]["quiver.yaml"])
    key_mount = next(m for m in c["volumeMounts"] if m["name"] == "key")["mountPath"]
    assert config["txn"]["descriptor_key_file"].startswith(key_mount + "/")
    assert docs[("Service", "quiver-headless")]["spec"]["clusterIP"] == "None"
    assert docs[("PodDisruptionBudget", "quiver")]["spec"]["maxUnavailable"] == 1
