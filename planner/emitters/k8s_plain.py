"""``k8s/plain.yaml``: the engine's own servers on plain Kubernetes (Deployment, LeaderWorkerSet,
Service, ConfigMap), each pod running the line ``launch.sh`` runs for its host."""

from __future__ import annotations

from collections.abc import Mapping

from planner.emitters.flag_table import Flags
from planner.emitters.k8s_commands import (
    EngineK8s,
    container_env,
    container_words,
    rank_script,
    read_configs,
)
from planner.emitters.k8s_objects import (
    COMPONENT_LABEL,
    INSTANCE_LABEL,
    NAME_LABEL,
    config_map,
    deployment,
    env_list,
    gpu_resources,
    leader_worker_set,
    mounts,
    node_affinity,
    pod_spec,
    readiness,
    service,
)
from planner.emitters.types import Command, EmitContext, EngineBuild, Slot
from planner.errors import PlannerInputError

Obj = dict[str, object]


class _Pods:
    """What every pod of one plain manifest shares."""

    def __init__(
        self,
        ctx: EmitContext,
        flags: Flags,
        build: EngineBuild,
        spec: EngineK8s,
        name: str,
        products: Mapping[str, tuple[str, ...]],
    ) -> None:
        self.ctx, self.flags, self.build, self.spec, self.name = ctx, flags, build, spec, name
        self.image = spec.image.format(version=flags.version_text)
        # role -> nodes of that role's GPU type
        self.affinity: dict[str, Obj] = {r: node_affinity(p) for r, p in products.items()}
        self.config = f"{name}-config" if build.configs else None
        self.lines = {(s.role, s.index, s.node_rank): c for s, c in build.servers}

    def container(
        self,
        words: list[str],
        env: list[Obj],
        gpus: int,
        port: int | None = None,
        health: str | None = None,
    ) -> Obj:
        out: Obj = {"name": "engine", "image": self.image, "command": words}
        if env:
            out["env"] = env
        if port is not None:
            out["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
            out["readinessProbe"] = readiness(port, health)
        if gpus:
            out["resources"] = gpu_resources(gpus)
        out["volumeMounts"] = mounts(self.config)
        return out

    def engine(self, slot: Slot, cmd: Command, port: int | None) -> Obj:
        pod_ip = self.spec.pod_ip_env if slot.role != "agg" else ()
        env = env_list(container_env(cmd), pod_ip)
        words = container_words(cmd, self.flags, self.build.configs)
        health = self.spec.health_path if port is not None else None
        return self.container(words, env, len(slot.gpu_ids), port, health)

    def pod(self, container: Obj, role: str | None = None) -> Obj:
        """A pod of ``container``: on nodes of ``role``'s GPU type (None: no GPU, any node)."""
        return pod_spec(container, self.affinity[role] if role else None, self.config)


def _labels(name: str, component: str, instance: str) -> dict[str, str]:
    return {NAME_LABEL: name, COMPONENT_LABEL: component, INSTANCE_LABEL: instance}


def _worker_container(p: _Pods, head: Slot, ranks: list[Slot]) -> Obj:
    """The container of the non-head pods of a multi-host replica."""
    lines = [(s.node_rank, p.lines.get((s.role, s.index, s.node_rank))) for s in ranks]
    gpus = len(ranks[0].gpu_ids)
    if all(c is None for _, c in lines):  # the head starts every rank (mpirun)
        if not p.spec.mpi_worker_command:
            raise PlannerInputError(
                "--target",
                f"{p.flags.engine} starts no line on the other hosts of a replica "
                "and names no mpi_worker_command in its k8s.yaml",
            )
        return p.container(list(p.spec.mpi_worker_command), [], gpus)
    cmds = [(r, c) for r, c in lines if c is not None]
    if len(cmds) != len(lines) or len({c.env for _, c in cmds}) != 1:
        raise PlannerInputError("--target", f"{p.flags.engine}: uneven lines across hosts")
    words = [(r, container_words(c, p.flags, p.build.configs)) for r, c in cmds]
    pod_ip = p.spec.pod_ip_env if head.role != "agg" else ()
    env = env_list(container_env(cmds[0][1]), pod_ip)
    command = words[0][1] if len(words) == 1 else rank_script(words)
    return p.container(command, env, gpus)


def _replica(p: _Pods, head: Slot) -> list[Obj]:
    """The workload of one replica, and its headless Service when it is a Deployment
    (LeaderWorkerSet makes its own, named after the set)."""
    replica = f"{p.name}-{head.role}-{head.index}"
    labels = _labels(p.name, head.role, replica)
    leader = p.pod(p.engine(head, p.lines[(head.role, head.index, 0)], head.port), head.role)
    model = p.ctx.model_id
    if head.nodes == 1:
        return [deployment(replica, labels, leader, model), service(replica, labels, None, labels)]
    ranks = sorted(
        (s for s in p.ctx.slots if (s.role, s.index) == (head.role, head.index) and s.node_rank),
        key=lambda s: s.node_rank,
    )
    worker = p.pod(_worker_container(p, head, ranks), head.role)
    return [leader_worker_set(replica, labels, head.nodes, leader, worker, model)]


def plain_objects(
    ctx: EmitContext,
    flags: Flags,
    build: EngineBuild,
    spec: EngineK8s,
    name: str,
    products: Mapping[str, tuple[str, ...]],
) -> list[Obj]:
    """Every object of ``k8s/plain.yaml``, in the order to apply them."""
    cmds = [c for _, c in build.servers] + ([build.router] if build.router else [])
    lines = [container_words(c, flags, build.configs) for c in cmds]
    build = build.model_copy(update={"configs": read_configs(lines, build.configs)})
    p = _Pods(ctx, flags, build, spec, name, products)
    docs: list[Obj] = []
    if p.config:
        files = {f.name: f.text for f in build.configs}
        docs.append(config_map(p.config, files, _labels(name, "config", p.config)))
    for head in ctx.heads():
        docs += _replica(p, head)
    front_labels = _labels(name, "front", name)
    if build.router is not None:
        port = build.endpoints[0][1]
        router = f"{name}-router"
        labels = _labels(name, "router", router)
        words = container_words(build.router, flags, build.configs)
        pod = p.pod(p.container(words, [], 0, port))
        docs += [deployment(router, labels, pod, ctx.model_id)]
        docs.append(
            service(name, {NAME_LABEL: name, COMPONENT_LABEL: "router"}, port, front_labels)
        )
    else:
        port = ctx.heads()[0].port
        role = ctx.heads()[0].role
        docs.append(service(name, {NAME_LABEL: name, COMPONENT_LABEL: role}, port, front_labels))
    return docs
