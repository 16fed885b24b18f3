"""Engine commands as Kubernetes container arguments: the same words ``launch.sh`` runs, bound to
every interface, config files read from their mount, and ``$(`` escaped so the kubelet expands
nothing; and the same flags for NVIDIA Dynamo's worker (``planner/engines/<name>/k8s.yaml``)."""

from __future__ import annotations

import shlex
from functools import cache

import yaml
from pydantic import BaseModel, ConfigDict, Field

from hardware.input_files import read_packaged_yaml
from planner.emitters.flag_table import Flags, Tool
from planner.emitters.types import Command, OutFile, Role
from planner.emitters.writer import argv, set_dotted, yaml_text
from planner.engines import get_engine

_FROZEN = ConfigDict(frozen=True, extra="forbid")
ANY_ADDRESS = "0.0.0.0"  # a pod is reached on its own IP: probes, Services and other pods
CONFIG_DIR = "/etc/planner"  # where the ConfigMap of the engine's config files is mounted
BIND_PARAMS: tuple[tuple[str, Tool], ...] = (("host", "serve"), ("router_host", "router"))
DROPPED_ENV = ("CUDA_VISIBLE_DEVICES",)  # the device plugin gives each container its GPUs


class DynamoWorker(BaseModel):
    """How NVIDIA Dynamo's worker for an engine takes the engine's own flags."""

    model_config = _FROZEN
    framework: str = Field(description="DynamoGraphDeployment spec.backendFramework value.")
    image: str = Field(description="Runtime image; {dynamo} is the Dynamo release.")
    program: tuple[str, ...] = Field(description="Words that start the worker.")
    model_flag: str = Field(description="Flag that takes the server's positional model ('': none).")
    drop: tuple[str, ...] = Field(description="Flag-table params the worker does not take.")
    rename: dict[str, str] = Field(description="Flag-table param -> the worker's flag.")
    role_args: dict[str, tuple[str, ...]] = Field(description="Role -> words the worker adds.")


class EngineK8s(BaseModel):
    """``planner/engines/<name>/k8s.yaml``."""

    model_config = _FROZEN
    image: str = Field(description="Engine image; {version} is the flag table's version.")
    health_path: str = Field(description="HTTP path that answers 200 once the server is ready.")
    pod_ip_env: tuple[str, ...] = Field(description="Variables set to the pod IP (disagg roles).")
    mpi_worker_command: tuple[str, ...] = Field(
        description="What a non-head pod runs when the head starts every rank (empty: none)."
    )
    dynamo: DynamoWorker = Field(description="The Dynamo worker of this engine.")
    sources: dict[str, str] = Field(description="Where each fact comes from.")


@cache
def engine_k8s(backend: str) -> EngineK8s:
    """The Kubernetes facts of engine ``backend``."""
    path = get_engine(backend).file("k8s.yaml")
    return EngineK8s.model_validate(read_packaged_yaml(path))


def kube_word(word: str) -> str:
    """A word the kubelet passes as is: ``$(VAR)`` in a command is expanded unless written
    ``$$(VAR)`` (Kubernetes API reference, Container ``command``/``args``)."""
    return word.replace("$(", "$$(")


def _cli_flag(flags: Flags, param: str, tool: Tool) -> str | None:
    row = flags.find(param, tool)
    return row.flag if row is not None and row.kind == "cli" else None


def bound(cmd: Command, flags: Flags) -> Command:
    """``cmd`` listening on every interface of its pod."""
    names = {f for p, t in BIND_PARAMS if (f := _cli_flag(flags, p, t)) is not None}
    args = tuple((f, (ANY_ADDRESS,) if f in names else v) for f, v in cmd.args)
    return cmd.model_copy(update={"args": args})


def _in_mount(word: str, configs: tuple[OutFile, ...]) -> str:
    names = {c.name for c in configs}
    return f"{CONFIG_DIR}/{word}" if word in names else word


def container_words(cmd: Command, flags: Flags, configs: tuple[OutFile, ...]) -> list[str]:
    """The exact words ``launch.sh`` runs for ``cmd`` (launcher included), ready for a pod."""
    words = [*bound(cmd, flags).launcher, *argv(bound(cmd, flags))]
    return [kube_word(_in_mount(w, configs)) for w in words]


def container_env(cmd: Command) -> list[tuple[str, str]]:
    """The command's environment, less what Kubernetes sets per container."""
    return [(k, kube_word(v)) for k, v in cmd.env if k not in DROPPED_ENV]


def dynamo_args(
    cmd: Command, flags: Flags, spec: DynamoWorker, role: Role, configs: tuple[OutFile, ...]
) -> list[str]:
    """The server's flags as the Dynamo worker's arguments (after ``spec.program``)."""
    drop = {f for p in spec.drop if (f := _cli_flag(flags, p, "serve")) is not None}
    rename = {f: new for p, new in spec.rename.items() if (f := _cli_flag(flags, p, "serve"))}
    words: list[str] = []
    if spec.model_flag:
        words += [spec.model_flag, *cmd.positional]
    for flag, values in bound(cmd, flags).args:
        if flag not in drop:
            words += [rename.get(flag, flag), *values]
    words += spec.role_args.get(role, ())
    return [kube_word(_in_mount(w, configs)) for w in words]


def bound_configs(flags: Flags, configs: tuple[OutFile, ...]) -> tuple[OutFile, ...]:
    """Config files whose listening address (a ``yaml`` bind row) is every interface."""
    rows = [r for p, t in BIND_PARAMS if (r := flags.find(p, t)) is not None and r.kind == "yaml"]
    out = []
    for f in configs:
        tree = yaml.safe_load(f.text) or {}
        hits = [r for r in rows if _has_dotted(tree, r.flag)]
        if not hits:
            out.append(f)
            continue
        for row in hits:
            set_dotted(tree, row.flag, ANY_ADDRESS)
        header = [line[2:] for line in f.text.splitlines() if line.startswith("# ")]
        out.append(f.model_copy(update={"text": yaml_text(tree, header)}))
    return tuple(out)


def _has_dotted(tree: object, dotted: str) -> bool:
    for key in dotted.split("."):
        if not isinstance(tree, dict) or key not in tree:
            return False
        tree = tree[key]
    return True


def read_configs(lines: list[list[str]], configs: tuple[OutFile, ...]) -> tuple[OutFile, ...]:
    """The config files some line reads (the others stay out of the ConfigMap)."""
    words = {w for line in lines for w in line}
    return tuple(f for f in configs if f"{CONFIG_DIR}/{f.name}" in words)


def rank_script(commands: list[tuple[int, list[str]]]) -> list[str]:
    """``sh -c`` words that run the line of this pod's rank (``LWS_WORKER_INDEX``, set by
    LeaderWorkerSet in every pod: github:kubernetes-sigs/lws pkg/utils/pod/pod_utils.go)."""
    cases = [
        f"  {rank}) exec {' '.join(shlex.quote(w) for w in words)} ;;" for rank, words in commands
    ]
    body = "\n".join(
        [
            'case "$LWS_WORKER_INDEX" in',
            *cases,
            '  *) echo "no line for rank $LWS_WORKER_INDEX" >&2; exit 1 ;;',
            "esac",
        ]
    )
    return ["/bin/sh", "-c", body]
