"""Kubernetes objects as plain mappings: pod specs, Deployments, LeaderWorkerSets, Services.

Field names and shapes follow the Kubernetes core API (apps/v1 Deployment, v1 Service and
ConfigMap) and the LeaderWorkerSet CRD (leaderworkerset.x-k8s.io/v1); the tests validate every
object against those schemas (tests/planner/emitters/k8s_schemas/).
"""

from __future__ import annotations

import re

from planner.emitters.k8s_commands import CONFIG_DIR
from planner.emitters.k8s_gpus import LABEL_KEY
from planner.errors import PlannerInputError

GPU_RESOURCE = "nvidia.com/gpu"  # NVIDIA device plugin resource name (k8s-device-plugin README)
NAME_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
INSTANCE_LABEL = "app.kubernetes.io/instance"
MODEL_ANNOTATION = "llm-serving-planner/model"
SHM_VOLUME, CONFIG_VOLUME = "dshm", "engine-config"
READY_DELAY_S, READY_PERIOD_S = 30, 10
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # RFC 1123 label, as Kubernetes checks
DNS_LABEL_MAX = 63


def check_name(name: str, field: str) -> str:
    """``name`` if it is a DNS-1123 label (what Kubernetes requires of these names)."""
    if len(name) > DNS_LABEL_MAX or not DNS_LABEL.match(name):
        raise PlannerInputError(
            field,
            f"{name!r} is not a DNS-1123 label (lower-case letters, digits and '-', "
            f"starting and ending with a letter or digit, at most {DNS_LABEL_MAX} characters)",
        )
    return name


def node_affinity(products: tuple[str, ...]) -> dict[str, object]:
    """Schedule only on nodes whose GPU product label is one of ``products``."""
    term = {"matchExpressions": [{"key": LABEL_KEY, "operator": "In", "values": list(products)}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def gpu_resources(gpus: int) -> dict[str, object]:
    """Requests equal to limits: extended resources cannot be overcommitted."""
    return {"limits": {GPU_RESOURCE: str(gpus)}, "requests": {GPU_RESOURCE: str(gpus)}}


def volumes(config_map: str | None) -> list[dict[str, object]]:
    """Shared memory for NCCL between the GPUs of a pod, and the engine's config files."""
    out: list[dict[str, object]] = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}]
    if config_map:
        out.append({"name": CONFIG_VOLUME, "configMap": {"name": config_map}})
    return out


def mounts(config_map: str | None) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
    if config_map:
        out.append({"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True})
    return out


def env_list(env: list[tuple[str, str]], pod_ip: tuple[str, ...] = ()) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [{"name": k, "value": v} for k, v in env]
    out += [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} for k in pod_ip]
    return out


def readiness(port: int, path: str | None) -> dict[str, object]:
    """HTTP GET ``path`` on ``port`` (a TCP connect when the process has no health path)."""
    action: dict[str, object] = (
        {"httpGet": {"path": path, "port": port}} if path else {"tcpSocket": {"port": port}}
    )
    return {**action, "initialDelaySeconds": READY_DELAY_S, "periodSeconds": READY_PERIOD_S}


def pod_spec(
    container: dict[str, object], affinity: dict[str, object] | None, config_map: str | None
) -> dict[str, object]:
    spec: dict[str, object] = {"containers": [container], "volumes": volumes(config_map)}
    if affinity:
        spec["affinity"] = affinity
    return spec


def meta(name: str, labels: dict[str, str], model: str) -> dict[str, object]:
    return {"name": name, "labels": labels, "annotations": {MODEL_ANNOTATION: model}}


def deployment(
    name: str, labels: dict[str, str], pod: dict[str, object], model: str
) -> dict[str, object]:
    """One replica (each replica has its own name: routers address replicas one by one)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(name, labels, model),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def leader_worker_set(
    name: str,
    labels: dict[str, str],
    size: int,
    leader: dict[str, object],
    worker: dict[str, object],
    model: str,
) -> dict[str, object]:
    """One replica spanning ``size`` hosts: a leader pod (node rank 0) and ``size - 1`` workers,
    restarted together (a lost rank stops the whole replica)."""
    worker_labels = {**labels, COMPONENT_LABEL: f"{labels[COMPONENT_LABEL]}-worker"}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": meta(name, labels, model),
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": size,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {"metadata": {"labels": labels}, "spec": leader},
                "workerTemplate": {"metadata": {"labels": worker_labels}, "spec": worker},
            },
        },
    }


def service(
    name: str, selector: dict[str, str], port: int | None, labels: dict[str, str]
) -> dict[str, object]:
    """A ClusterIP Service on ``port``; without a port a headless one (DNS names the pod, every
    port of it reachable)."""
    spec: dict[str, object] = {"selector": selector}
    if port is None:
        spec["clusterIP"] = "None"
    else:
        spec["ports"] = [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def config_map(name: str, files: dict[str, str], labels: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": files,
    }
