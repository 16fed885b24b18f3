"""``planner emit --target k8s``: the plan as Kubernetes manifests, built in memory, then written.

- ``k8s/plain.yaml``: one Deployment per replica that fits a host, one LeaderWorkerSet per replica
  wider than a host, a headless Service per Deployment replica (routers address replicas by
  name), the router's Deployment when the engine build has one, a ConfigMap of the engine's config
  files, and a Service named after the deployment in front of the router or the replicas.
- ``k8s/dynamo.yaml``: an NVIDIA Dynamo ``DynamoGraphDeployment`` (nvidia.com/v1alpha1) with a
  frontend and one service per role; its operator adds the multi-host launch flags itself.

The per-process command lines come from the engine's own ``build`` (the one ``launch.sh`` is
written from), over a placement with one pod per host of each replica.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from planner.emitters.bundle import emitter, engine_build
from planner.emitters.common import roles
from planner.emitters.flag_table import Flags
from planner.emitters.k8s_commands import (
    bound_configs,
    engine_k8s,
)
from planner.emitters.k8s_dynamo import dynamo_objects
from planner.emitters.k8s_gpus import product_labels
from planner.emitters.k8s_objects import check_name
from planner.emitters.k8s_plain import plain_objects
from planner.emitters.plan_file import PlanFile
from planner.emitters.types import EmitContext, EngineBuild, OutFile, Slot
from planner.emitters.writer import comment
from planner.perf.deployment import Deployment
from planner.safe_files import check_new_file, prepare_out_dir, write_new_file

K8S_DIR = "k8s"
BASE_NAME_MAX = 40  # leaves room for "-prefill-NN" and LeaderWorkerSet pod suffixes within 63


def base_name(plan: PlanFile, backend: str) -> str:
    """``<model>-<backend>`` as a DNS-1123 label (the name every object starts with)."""
    raw = f"{plan.best.deployment.model}-{backend}".lower()
    words = [w for w in re.split(r"[^a-z0-9]+", raw) if w]
    name = "-".join(words)[:BASE_NAME_MAX].strip("-")
    return check_name(name, "plan.best.deployment.model")


def replica_name(name: str, role: str, index: int) -> str:
    return check_name(f"{name}-{role}-{index}", "plan.best.deployment")


def pod_slots(
    dep: Deployment, base_port: int, node_gpus: int | Mapping[str, int], name: str
) -> tuple[Slot, ...]:
    """One slot per pod: each replica on its own pods (one per host it spans), every server on
    the engine's base port of its own pod IP. Host names are the DNS names of those pods: the
    headless Service of a Deployment replica, or LeaderWorkerSet's ``<name>-0[-<rank>].<name>``
    (group 0 of a one-group set; pod names and subdomain as LeaderWorkerSet sets them);
    ``node_gpus``: GPUs per host, or per role (roles on two GPU types)."""
    slots: list[Slot] = []
    for role, worker in roles(dep):
        width = worker.parallel.gpus
        per_host = node_gpus if isinstance(node_gpus, int) else node_gpus[role]
        nodes = -(-width // per_host)
        for index in range(worker.workers):
            replica = replica_name(name, role, index)
            head = f"{replica}-0.{replica}" if nodes > 1 else replica
            for rank in range(nodes):
                host = head if rank == 0 else f"{replica}-0-{rank}.{replica}"
                slots.append(
                    Slot(
                        role=role,
                        index=index,
                        worker=worker,
                        node=len(slots),
                        gpu_ids=tuple(range(width // nodes)),
                        host=host,
                        port=base_port,
                        nodes=nodes,
                        node_rank=rank,
                        head=head if nodes > 1 else "",
                    )
                )
    return tuple(slots)


def role_slots(dep: Deployment, base_port: int, name: str) -> tuple[Slot, ...]:
    """One single-pod slot per role, all of the worker's GPUs in it: the lines Dynamo's operator
    starts (it adds the multi-host flags of each rank itself)."""
    return tuple(
        Slot(
            role=role,
            index=0,
            worker=worker,
            node=i,
            gpu_ids=tuple(range(worker.parallel.gpus)),
            host=f"{name}-{role}",
            port=base_port,
        )
        for i, (role, worker) in enumerate(roles(dep))
    )


def _rebuild(
    ctx: EmitContext, flags: Flags, backend: str, slots: tuple[Slot, ...]
) -> tuple[EmitContext, EngineBuild]:
    placed = ctx.model_copy(update={"slots": slots, "platform": "kubernetes"})
    return placed, emitter(backend).build(placed, flags)


class _NoAliases(yaml.SafeDumper):
    """Every mapping written out in full where it is used (no ``&id``/``*id`` references)."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    """Several lines as a literal block (a rank script reads as the shell runs it)."""
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_NoAliases.add_representer(str, _str)


def _text(title: str, docs: list[dict[str, object]]) -> str:
    body = yaml.dump_all(docs, Dumper=_NoAliases, sort_keys=False, default_flow_style=False)
    return "".join(comment(line) + "\n" for line in title.splitlines()) + "---\n" + body


def build_k8s(
    plan: PlanFile, backend: str, version: str | None = None, hardware_dirs: tuple[str, ...] = ()
) -> tuple[OutFile, ...]:
    """``k8s/dynamo.yaml`` and ``k8s/plain.yaml``, built in memory; raises before any write."""
    ctx, flags, _ = engine_build(plan, backend, version, hardware_dirs)
    dep = ctx.deployment
    name = base_name(plan, backend)
    spec = engine_k8s(backend)
    # each role's pods on nodes of its own GPU type
    products: dict[str, tuple[str, ...]] = {
        role: product_labels(dep.role_gpu(role)) for role, _ in roles(dep)
    }
    base_port = emitter(backend).BASE_PORT
    hosts: dict[str, int] = {role: ctx.hosts_of(role) for role, _ in roles(dep)}
    pods_ctx, pods = _rebuild(ctx, flags, backend, pod_slots(dep, base_port, hosts, name))
    pods = pods.model_copy(update={"configs": bound_configs(flags, pods.configs)})
    plain = plain_objects(pods_ctx, flags, pods, spec, name, products)
    roles_ctx, per_role = _rebuild(ctx, flags, backend, role_slots(dep, base_port, name))
    dynamo = dynamo_objects(roles_ctx, flags, per_role, spec, name, products)
    what = (
        f"{ctx.model_id} on {dep.total_gpus} x {_labels_text(dep, products)}, "
        f"{flags.engine} {flags.version_text}, {dep.mode}; written by planner emit --target k8s"
    )
    return (
        OutFile(name=f"{K8S_DIR}/dynamo.yaml", text=_text(f"NVIDIA Dynamo: {what}", dynamo)),
        OutFile(name=f"{K8S_DIR}/plain.yaml", text=_text(f"Kubernetes: {what}", plain)),
    )


def _labels_text(dep: Deployment, products: Mapping[str, tuple[str, ...]]) -> str:
    """'h200_sxm (NVIDIA-H200)', each role's where the roles run on two GPU types."""
    if not dep.prefill_gpu:
        return f"{dep.gpu} ({', '.join(next(iter(products.values())))})"
    return "; ".join(
        f"{role} {dep.role_gpu(role)} ({', '.join(labels)})" for role, labels in products.items()
    )


def write_k8s(
    files: tuple[OutFile, ...], out_dir: str | Path, force: bool = False, flag: str = "--out"
) -> list[Path]:
    """Write the manifests under ``out_dir`` (each target checked before any is written)."""
    out = prepare_out_dir(out_dir, force, flag)
    sub = prepare_out_dir(out / K8S_DIR, force, flag)
    targets = [sub / Path(f.name).name for f in files]
    for path in targets:
        check_new_file(path, force, flag)
    pairs = zip(targets, files, strict=True)
    return [write_new_file(p, f.text.encode(), force, flag) for p, f in pairs]
