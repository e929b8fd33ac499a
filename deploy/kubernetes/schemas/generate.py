"""Writes the Kubernetes API schemas the manifests of deploy/kubernetes are
validated against (deploy/kubernetes/manifests_test.go, kubeconform), so
that the test needs no network: one standalone, strict JSON schema per kind
the manifests use, in kubeconform's layout
(v<version>-standalone-strict/<kind>[-<group>]-<version>.json).

The schemas come from the PyPI package kubernetes-validate (pinned below),
which ships the API's JSON schemas generated from the Kubernetes OpenAPI
spec, one file per kind with references into a shared _definitions.json.
This script downloads its wheel with pip, takes the kinds the manifests
name, and copies into each file the definitions it reaches, so that every
file stands alone (and holds only what its kind needs).

Usage (any Python >= 3.10 with pip; `make k8s-schemas`):
    python3 deploy/kubernetes/schemas/generate.py
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE, VERSION = "kubernetes-validate", "1.37.0"  # the Kubernetes version too
HERE = Path(__file__).resolve().parent
MANIFESTS = HERE.parent
OUT = HERE / f"v{VERSION}-standalone-strict"
SOURCE = f"kubernetes_validate/kubernetes-json-schema/v{VERSION}-local-strict/"
# A kind file refers to "/api/_definitions.json#/$defs/NAME", a definition to
# "#/$defs/NAME" (inside _definitions.json).
REF = re.compile(r"^(?:/api/_definitions\.json)?#/\$defs/(.+)$")


def kinds() -> set[str]:
    """The schema file names of the kinds the manifests use: each YAML
    document's top-level apiVersion and kind."""
    out = set()
    for path in MANIFESTS.glob("*.yaml"):
        for doc in re.split(r"^---$", path.read_text(), flags=re.M):
            api = re.search(r"^apiVersion:\s*(\S+)", doc, re.M)
            kind = re.search(r"^kind:\s*(\S+)", doc, re.M)
            if not (api and kind):
                continue
            group, _, version = api.group(1).rpartition("/")
            suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
            out.add(kind.group(1).lower() + suffix.lower() + ".json")
    return out


def standalone(schema: dict, definitions: dict) -> dict:
    """schema with the definitions it reaches under $defs and its
    references pointing there."""
    reached: dict[str, dict] = {}

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and (m := REF.match(ref)):
                name = m.group(1)
                node["$ref"] = "#/$defs/" + name
                if name not in reached:
                    reached[name] = definitions[name]
                    walk(reached[name])
            for k, v in node.items():
                if k != "$ref":
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    schema.pop("$id", None)  # its references are local now
    schema["$defs"] = dict(sorted(reached.items()))
    return schema


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                        "--no-deps", "--only-binary=:all:", "-d", tmp, f"{PACKAGE}=={VERSION}"], check=True)
        (wheel,) = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as z:
            defs = json.loads(z.read(SOURCE + "_definitions.json"))["$defs"]
            names = sorted(kinds())
            # Copies: standalone edits the definitions it reaches.
            schemas = {n: standalone(json.loads(z.read(SOURCE + n)), json.loads(json.dumps(defs))) for n in names}
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir()
    for name, schema in schemas.items():
        (OUT / name).write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
        print(f"{OUT.relative_to(MANIFESTS.parent.parent)}/{name}")


if __name__ == "__main__":
    main()
