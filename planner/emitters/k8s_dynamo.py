"""``k8s/dynamo.yaml``: an NVIDIA Dynamo ``DynamoGraphDeployment`` running the engine's flags.

Shape checked against the CRD at github:ai-dynamo/dynamo@db88c9530 (the commit that set the
release to 1.0.0) deploy/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml: a
``services`` map of components (``componentType`` frontend or worker), ``resources.limits.gpu``
per node, ``multinode.nodeCount`` for a worker wider than a host (GPUs = nodes x limit), and the
container under ``extraPodSpec.mainContainer``.
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.emitters.flag_table import Flags
from planner.emitters.k8s_commands import EngineK8s, container_env, dynamo_args, read_configs
from planner.emitters.k8s_objects import (
    NAME_LABEL,
    config_map,
    env_list,
    meta,
    mounts,
    node_affinity,
    volumes,
)
from planner.emitters.types import Command, EmitContext, EngineBuild, Slot

DYNAMO_RELEASE = "1.0.0"  # github:ai-dynamo/dynamo db88c9530 "chore: bump versions to 1.0.0"
FRONTEND_PORT = 8000  # examples/backends/*/deploy/*.yaml: dynamo.frontend --http-port 8000
Obj = dict[str, object]


def _worker(
    ctx: EmitContext,
    flags: Flags,
    build: EngineBuild,
    spec: EngineK8s,
    slot: Slot,
    cmd: Command,
    products: Mapping[str, tuple[str, ...]],
    config: str | None,
) -> Obj:
    worker = slot.worker
    nodes = -(-worker.parallel.gpus // ctx.hosts_of(slot.role))
    per_node = str(worker.parallel.gpus // nodes)
    pod_ip = spec.pod_ip_env if slot.role != "agg" else ()
    container: Obj = {
        "image": spec.dynamo.image.format(dynamo=DYNAMO_RELEASE),
        "command": list(spec.dynamo.program),
        "args": dynamo_args(cmd, flags, spec.dynamo, slot.role, build.configs),
        "volumeMounts": mounts(config),
    }
    env = env_list(container_env(cmd), pod_ip)
    if env:
        container["env"] = env
    out: Obj = {
        "componentType": "worker",
        "replicas": worker.workers,
        "resources": {"limits": {"gpu": per_node}, "requests": {"gpu": per_node}},
        "extraPodSpec": {
            "affinity": node_affinity(products[slot.role]),
            "volumes": volumes(config),
            "mainContainer": container,
        },
    }
    if slot.role != "agg":
        out["subComponentType"] = slot.role
    if nodes > 1:
        out["multinode"] = {"nodeCount": nodes}
    return out


def dynamo_objects(
    ctx: EmitContext,
    flags: Flags,
    build: EngineBuild,
    spec: EngineK8s,
    name: str,
    products: Mapping[str, tuple[str, ...]],
) -> list[Obj]:
    """The ConfigMap of the engine's config files (if any) and the DynamoGraphDeployment."""
    lines = [dynamo_args(c, flags, spec.dynamo, s.role, build.configs) for s, c in build.servers]
    build = build.model_copy(update={"configs": read_configs(lines, build.configs)})
    config = f"{name}-config" if build.configs else None
    image = spec.dynamo.image.format(dynamo=DYNAMO_RELEASE)
    services: Obj = {
        "Frontend": {
            "componentType": "frontend",
            "replicas": 1,
            "extraPodSpec": {
                "mainContainer": {
                    "image": image,
                    "command": ["python3", "-m", "dynamo.frontend"],
                    "args": ["--http-port", str(FRONTEND_PORT)],
                }
            },
        }
    }
    for slot, cmd in build.servers:
        key = "worker" if slot.role == "agg" else slot.role
        services[key] = _worker(ctx, flags, build, spec, slot, cmd, products, config)
    graph: Obj = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": meta(name, {NAME_LABEL: name}, ctx.model_id),
        "spec": {"backendFramework": spec.dynamo.framework, "services": services},
    }
    docs: list[Obj] = []
    if config:
        files = {f.name: f.text for f in build.configs}
        docs.append(config_map(config, files, {NAME_LABEL: name}))
    return [*docs, graph]
