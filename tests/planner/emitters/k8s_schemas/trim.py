"""Rebuild the schema test data of this folder from the published sources (not run by the tests).

    python tests/planner/emitters/k8s_schemas/trim.py DYNAMO_CRD LWS_CRD K8S_SCHEMA_DIR

DYNAMO_CRD, LWS_CRD: the CustomResourceDefinition YAML files; K8S_SCHEMA_DIR: a
``v<release>-local-strict`` folder of JSON schemas generated from the Kubernetes release's
OpenAPI (SOURCES.md says which). Each schema is trimmed to what validation reads: descriptions
and other annotation-only keywords are dropped, and of the Kubernetes definitions only those the
needed kinds reach are kept.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).parent
DROP = {"description", "example", "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key"}
CORE_KINDS = {
    "Deployment": "deployment-apps-v1.json",
    "Service": "service-v1.json",
    "ConfigMap": "configmap-v1.json",
}


def strip(node: object) -> object:
    """``node`` without annotation-only keywords (they change no validation result)."""
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k not in DROP or not isinstance(v, str)}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def crd_schema(path: Path, version: str) -> object:
    crd = yaml.safe_load(path.read_text())
    (ver,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return strip(ver["schema"]["openAPIV3Schema"])


def refs(node: object) -> set[str]:
    if isinstance(node, dict):
        own = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return own.union(*(refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(refs(v) for v in node))
    return set()


def core_schemas(folder: Path) -> dict[str, object]:
    """Each kind's schema with the definitions it reaches, in one file."""
    defs = json.loads((folder / "_definitions.json").read_text())["$defs"]
    kinds = {k: json.loads((folder / f).read_text()) for k, f in CORE_KINDS.items()}
    todo = set().union(*(refs(s) for s in kinds.values()))
    keep: dict[str, object] = {}
    while todo:
        name = todo.pop().rsplit("/", 1)[-1]
        if name not in keep:
            keep[name] = defs[name]
            todo |= refs(defs[name])
    out = {k: local(strip(s)) for k, s in kinds.items()}
    return {"kinds": out, "$defs": local(strip(dict(sorted(keep.items()))))}


def local(node: object) -> object:
    """References into ``_definitions.json`` as references into this file's ``$defs``."""
    if isinstance(node, dict):
        return {
            k: ("#/$defs/" + v.rsplit("/", 1)[-1] if k == "$ref" else local(v))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [local(v) for v in node]
    return node


def _write(name: str, data: object) -> None:
    text = json.dumps(data, sort_keys=True, indent=0, separators=(",", ":"))
    (HERE / name).write_text(text + "\n")


def main(dynamo: str, lws: str, core: str) -> None:
    _write("dynamographdeployment.json", crd_schema(Path(dynamo), "v1alpha1"))
    _write("leaderworkerset.json", crd_schema(Path(lws), "v1"))
    _write("kubernetes_core.json", core_schemas(Path(core)))


if __name__ == "__main__":
    main(*sys.argv[1:4])
