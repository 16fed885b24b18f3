"""Typed, engine-neutral records the emitters build before anything is written."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.perf.deployment import Deployment, Speculative, WorkerConfig

_FROZEN = ConfigDict(frozen=True, extra="forbid")

Role = Literal["agg", "prefill", "decode"]


class Command(BaseModel):
    """One process to start: environment, program words, positionals and flags."""

    model_config = _FROZEN
    program: tuple[str, ...] = Field(
        description="Words that start the tool, e.g. ('vllm', 'serve')."
    )
    positional: tuple[str, ...] = Field(
        default=(), description="Positional arguments after the program."
    )
    args: tuple[tuple[str, tuple[str, ...]], ...] = Field(
        default=(), description="(flag, values); no values means a bare switch."
    )
    env: tuple[tuple[str, str], ...] = Field(
        default=(), description="Environment variables set for the command."
    )
    comment: str = Field(default="", description="Comment written above the command.")
    launcher: tuple[str, ...] = Field(
        default=(),
        description="Words before the program that start it on several hosts (e.g. mpirun ...); "
        "not part of the engine's argument vector.",
    )


class OutFile(BaseModel):
    """One file of the bundle, built fully in memory."""

    model_config = _FROZEN
    name: str = Field(description="File name inside the output folder.")
    text: str = Field(description="File contents.")
    executable: bool = Field(default=False, description="Written with the executable bit.")


class Slot(BaseModel):
    """Where one worker replica runs: its role, GPUs, node and port."""

    model_config = _FROZEN
    role: Role = Field(description="Role of the worker (agg, prefill or decode).")
    index: int = Field(ge=0, description="Replica index within the role.")
    worker: WorkerConfig = Field(description="The worker's engine settings.")
    node: int = Field(ge=0, description="Index of the node the worker runs on.")
    gpu_ids: tuple[int, ...] = Field(description="Local GPU ids on this slot's node.")
    host: str = Field(description="Host name or address of that node.")
    port: int = Field(description="Port the worker serves on.")
    nodes: int = Field(default=1, ge=1, description="Hosts the replica spans (one slot each).")
    node_rank: int = Field(default=0, ge=0, description="This slot's rank among those hosts.")
    head: str = Field(default="", description="Host of node rank 0 (multi-node replicas).")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class Workload(BaseModel):
    """What the benchmark replays: fixed ISL/OSL and closed-loop concurrency or open-loop rate,
    and the longest prompt and answer the deployment must accept."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    isl: int = Field(ge=1, description="Input tokens per request.")
    osl: int = Field(ge=1, description="Output tokens per request.")
    max_isl: int | None = Field(
        default=None, ge=1, description="Longest prompt the deployment must accept, tokens."
    )
    max_osl: int | None = Field(
        default=None, ge=1, description="Longest answer the deployment must accept, tokens."
    )
    concurrency: int | None = Field(
        default=None, ge=1, description="Closed loop: concurrent clients."
    )
    rate: float | None = Field(default=None, gt=0, description="Open loop: requests/s.")


class PrefixCaching(BaseModel):
    """Prefix caching the plan priced (``planner plan --trace``: solvers.plan_prefix.PrefixPlan):
    the KV tiers per GPU and the router's policy."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    enabled: bool = Field(default=True, description="Prefix caching is on.")
    routing: Literal["round-robin", "prefix", "session"] = Field(
        default="round-robin", description="How the router picks a replica."
    )
    host_kv_gib_per_gpu: float = Field(
        default=0.0, ge=0, le=1e5, description="Host memory for offloaded KV per GPU, GiB."
    )
    ssd_kv_gib_per_gpu: float = Field(
        default=0.0, ge=0, le=1e7, description="SSD for offloaded KV per GPU, GiB."
    )


class EmitContext(BaseModel):
    """Everything an engine emitter needs: the deployment, where it runs, and the workload."""

    model_config = _FROZEN
    deployment: Deployment = Field(description="The deployment to launch.")
    model_id: str = Field(
        description="What the engine loads: the model's identity (HF id or path)."
    )
    quant: dict[str, str | None] = Field(
        default_factory=dict,
        description=(
            "Role -> the engine's --quantization value (None: the engine reads the checkpoint)."
        ),
    )
    slots: tuple[Slot, ...] = Field(description="Every worker with its node and port.")
    workload: Workload = Field(
        description="The load the deployment was planned for (the benchmark replays it)."
    )
    node_gpus: int = Field(default=8, ge=1, description="GPUs per host the slots were packed in.")
    role_node_gpus: dict[str, int] = Field(
        default_factory=dict,
        description="Role -> GPUs per host of that role's GPU type where the prefill and decode "
        "workers run on two types (their own hosts); empty: ``node_gpus`` for every role.",
    )

    def hosts_of(self, role: str) -> int:
        """GPUs per host of ``role``'s GPU type."""
        return self.role_node_gpus.get(role, self.node_gpus)

    listen: str = Field(
        default="",
        description="Address servers and the router listen on; empty: 127.0.0.1 on one host, "
        "0.0.0.0 when several hosts take part (``--host``).",
    )
    speculative: Speculative | None = Field(
        default=None, description="Speculative decoding of the plan; None: off."
    )
    prefix_cache: PrefixCaching | None = Field(
        default=None,
        description="Prefix caching, KV tiers and routing of the plan; None: the "
        "engine's defaults and round-robin routing.",
    )
    platform: Literal["hosts", "kubernetes"] = Field(
        default="hosts",
        description="Where the processes run: on hosts named in launch.sh, or as Kubernetes "
        "pods (a router then finds its workers through the Kubernetes API).",
    )

    def role_slots(self, role: Role) -> tuple[Slot, ...]:
        """The replicas of ``role`` (node rank 0 of multi-node ones: where requests go)."""
        return tuple(s for s in self.heads() if s.role == role)

    def heads(self) -> tuple[Slot, ...]:
        """One slot per replica: node rank 0, the one that serves HTTP."""
        return tuple(s for s in self.slots if s.node_rank == 0)


class EngineBuild(BaseModel):
    """What one engine emitter returns: servers, optional router, config files, bench targets."""

    model_config = _FROZEN
    servers: tuple[tuple[Slot, Command], ...] = Field(
        description="Each worker slot with its launch command."
    )
    router: Command | None = Field(
        default=None,
        description="The router's launch command (disaggregated, or several aggregated "
        "replicas); None for one aggregated replica.",
    )
    router_node: int = Field(default=0, description="Node the router runs on.")
    configs: tuple[OutFile, ...] = Field(default=(), description="Config files the commands read.")
    endpoints: tuple[tuple[str, int], ...] = Field(
        description="(host, port) the benchmark targets."
    )
    notes: tuple[str, ...] = Field(default=(), description="Notes for the launch README.")
