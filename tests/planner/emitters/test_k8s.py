"""``planner emit --target k8s``: every manifest validates against the schema of its kind (the
Dynamo and LeaderWorkerSet CRDs, the Kubernetes core API; k8s_schemas/SOURCES.md), the GPUs
requested add up to the plan's, and every engine container runs the flags ``launch.sh`` runs.

Runs over {vllm, sglang, trtllm} x {agg on one host, agg with several replicas, agg wider than a
host (2 and 4 hosts), disagg}.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import planner.emitters.engine_args as ea
from planner.emitters.bundle import emitter, engine_build
from planner.emitters.common import render
from planner.emitters.k8s import build_k8s, write_k8s
from planner.emitters.k8s_commands import engine_k8s, kube_word
from planner.emitters.k8s_gpus import gfd_label, product_labels
from planner.emitters.k8s_objects import DNS_LABEL, GPU_RESOURCE
from planner.emitters.plan_file import parse_plan
from planner.engines.registry import BUILTIN
from planner.errors import PlannerInputError
from tests.planner.emitters.plans import default_agg_plan, disagg_plan, two_types_plan

SCHEMAS = Path(__file__).parent / "k8s_schemas"
ENGINES = tuple(BUILTIN)


def _agg(parallel: dict[str, int], workers: int) -> dict[str, Any]:
    plan = default_agg_plan()
    agg = plan["best"]["deployment"]["agg"]
    agg.update(parallel=parallel, workers=workers)
    plan["best"]["gpus"] = (
        workers * parallel.get("tp", 1) * parallel.get("pp", 1) * parallel.get("dp", 1)
    )
    return plan


PLANS = {
    "agg-single-host": lambda: _agg({"tp": 4}, 1),
    "agg-multi-replica": lambda: _agg({"tp": 4}, 3),
    "agg-two-hosts": lambda: _agg({"tp": 8, "pp": 2}, 2),
    "agg-four-hosts": lambda: _agg({"tp": 8, "pp": 4}, 1),
    "agg-dp-ep-two-hosts": lambda: _agg({"tp": 1, "dp": 16, "ep": 16}, 1),
    "disagg": disagg_plan,
    "disagg-two-types": two_types_plan,
}
CASES = [(b, p) for b in ENGINES for p in PLANS]


@cache
def _core() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCHEMAS / "kubernetes_core.json").read_text())
    return data


@cache
def _crd(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCHEMAS / f"{name}.json").read_text())
    return data


def schema_of(doc: dict[str, Any]) -> dict[str, Any]:
    """The schema of ``doc``'s kind (an unknown kind fails the test)."""
    kind = doc["kind"]
    if kind == "DynamoGraphDeployment":
        assert doc["apiVersion"] == "nvidia.com/v1alpha1"
        return _crd("dynamographdeployment")
    if kind == "LeaderWorkerSet":
        assert doc["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
        return _crd("leaderworkerset")
    core = _core()
    return {**core["kinds"][kind], "$defs": core["$defs"]}


def unknown_fields(doc: Any, schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """Fields a CRD schema does not declare (the API server would drop them silently)."""
    if isinstance(doc, dict) and "properties" in schema:
        for key, value in doc.items():
            sub = schema["properties"].get(key)
            if sub is None:
                yield f"{path}.{key}"
            else:
                yield from unknown_fields(value, sub, f"{path}.{key}")
    elif isinstance(doc, dict) and isinstance(schema.get("additionalProperties"), dict):
        for key, value in doc.items():
            yield from unknown_fields(value, schema["additionalProperties"], f"{path}.{key}")
    elif isinstance(doc, list) and isinstance(schema.get("items"), dict):
        for i, value in enumerate(doc):
            yield from unknown_fields(value, schema["items"], f"{path}[{i}]")


@cache
def manifests(backend: str, plan: str) -> dict[str, list[dict[str, Any]]]:
    files = build_k8s(parse_plan(PLANS[plan]()), backend)
    return {f.name: list(yaml.safe_load_all(f.text)) for f in files}


def _docs(backend: str, plan: str, name: str) -> list[dict[str, Any]]:
    return manifests(backend, plan)[f"k8s/{name}.yaml"]


@pytest.mark.parametrize(("backend", "plan"), CASES)
def test_every_manifest_validates_against_its_schema(backend: str, plan: str) -> None:
    for name in ("plain", "dynamo"):
        for doc in _docs(backend, plan, name):
            schema = schema_of(doc)
            jsonschema.Draft202012Validator(schema).validate(doc)
            if doc["kind"] in ("DynamoGraphDeployment", "LeaderWorkerSet"):
                assert list(unknown_fields(doc, schema)) == []
            assert DNS_LABEL.match(doc["metadata"]["name"]), doc["metadata"]["name"]


def test_schemas_refuse_what_they_should() -> None:
    """The validation can fail: a misspelt field, a string GPU count, a missing template."""
    doc = _docs("vllm", "agg-two-hosts", "plain")
    lws = copy.deepcopy(next(d for d in doc if d["kind"] == "LeaderWorkerSet"))
    lws["spec"]["leaderWorkerTemplate"]["size"] = "2"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(lws, schema_of(lws))
    plain = _docs("vllm", "agg-single-host", "plain")
    dep = copy.deepcopy(next(d for d in plain if d["kind"] == "Deployment"))
    dep["spec"]["template"]["spec"]["containers"][0]["comand"] = ["x"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(dep, schema_of(dep))
    dgd = copy.deepcopy(_docs("vllm", "disagg", "dynamo")[-1])
    dgd["spec"]["services"]["prefill"]["replica"] = 2
    assert list(unknown_fields(dgd, schema_of(dgd))) == [".spec.services.prefill.replica"]


def _pod_gpus(pod: dict[str, Any]) -> int:
    limits = [c.get("resources", {}).get("limits", {}) for c in pod["containers"]]
    return sum(int(lim.get(GPU_RESOURCE, 0)) for lim in limits)


def plain_gpus(docs: list[dict[str, Any]]) -> int:
    total = 0
    for d in docs:
        if d["kind"] == "Deployment":
            total += d["spec"]["replicas"] * _pod_gpus(d["spec"]["template"]["spec"])
        elif d["kind"] == "LeaderWorkerSet":
            t = d["spec"]["leaderWorkerTemplate"]
            per = _pod_gpus(t["leaderTemplate"]["spec"])
            per += (t["size"] - 1) * _pod_gpus(t["workerTemplate"]["spec"])
            total += d["spec"]["replicas"] * per
    return total


def dynamo_gpus(docs: list[dict[str, Any]]) -> int:
    (graph,) = [d for d in docs if d["kind"] == "DynamoGraphDeployment"]
    total = 0
    for svc in graph["spec"]["services"].values():
        gpus = int(svc.get("resources", {}).get("limits", {}).get("gpu", 0))
        total += svc["replicas"] * svc.get("multinode", {}).get("nodeCount", 1) * gpus
    return total


@pytest.mark.parametrize(("backend", "plan"), CASES)
def test_gpus_requested_equal_the_plans(backend: str, plan: str) -> None:
    want = parse_plan(PLANS[plan]()).best.deployment.total_gpus
    assert plain_gpus(_docs(backend, plan, "plain")) == want
    assert dynamo_gpus(_docs(backend, plan, "dynamo")) == want


def _pods(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for d in docs:
        if d["kind"] == "Deployment":
            yield d["metadata"]["name"], d["spec"]["template"]["spec"]
        elif d["kind"] == "LeaderWorkerSet":
            t = d["spec"]["leaderWorkerTemplate"]
            yield d["metadata"]["name"], t["leaderTemplate"]["spec"]
            yield d["metadata"]["name"] + "/worker", t["workerTemplate"]["spec"]


@pytest.mark.parametrize(("backend", "plan"), CASES)
def test_gpu_pods_select_the_gpu_and_servers_have_readiness(backend: str, plan: str) -> None:
    """Every GPU pod selects nodes of its role's GPU type (two types: prefill pods on the prefill
    type's nodes, decode pods on the decode type's), plain and Dynamo alike."""
    dep = parse_plan(PLANS[plan]()).best.deployment
    health = engine_k8s(backend).health_path
    graph = _docs(backend, plan, "dynamo")[-1]
    for key, svc in graph["spec"]["services"].items():
        if key == "Frontend":
            continue
        term = svc["extraPodSpec"]["affinity"]["nodeAffinity"]
        expr = term["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
        role = "agg" if key == "worker" else key
        assert expr["matchExpressions"][0]["values"] == list(product_labels(dep.role_gpu(role)))
    for name, pod in _pods(_docs(backend, plan, "plain")):
        if _pod_gpus(pod):
            role = next(r for r in ("agg", "prefill", "decode") if f"-{r}-" in name)
            labels = list(product_labels(dep.role_gpu(role)))
            term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            expr = term["nodeSelectorTerms"][0]["matchExpressions"][0]
            assert (expr["key"], expr["values"]) == ("nvidia.com/gpu.product", labels), name
        container = pod["containers"][0]
        if "ports" in container and _pod_gpus(pod):
            probe = container["readinessProbe"]["httpGet"]
            assert (probe["path"], probe["port"]) == (
                health,
                container["ports"][0]["containerPort"],
            )


def _contains(words: list[str], part: list[str]) -> bool:
    n = len(part)
    return any(words[i : i + n] == part for i in range(len(words) - n + 1))


@pytest.mark.parametrize(("backend", "plan"), CASES)
def test_containers_run_the_engine_flags_of_launch_sh(backend: str, plan: str) -> None:
    """The planner values of each role, rendered as launch.sh renders them, appear in the
    plain container and in the Dynamo worker; config files travel unchanged; each plain line
    parses with the engine's own argument list; the model identity is on every line."""
    ctx, flags, build = engine_build(parse_plan(PLANS[plan]()), backend)
    first = {s.role: s for s in reversed(ctx.slots)}
    plain = _docs(backend, plan, "plain")
    graph = _docs(backend, plan, "dynamo")[-1]
    configs = {f.name: f.text for f in build.configs}
    for role, slot in first.items():
        rendered = render(flags, emitter(backend).serve_values(ctx, slot)).args
        expected = [[f, *v] for f, v in rendered]
        name = f"{next(iter(_pods(plain)))[0].rsplit('-', 2)[0]}-{role}-0"
        pod = dict(_pods(plain))[name]
        words = pod["containers"][0]["command"]
        assert ctx.model_id in words
        assert all(_contains(words, e) for e in expected), (words, expected)
        key = "worker" if role == "agg" else role
        args = graph["spec"]["services"][key]["extraPodSpec"]["mainContainer"]["args"]
        assert ctx.model_id in args
        assert all(_contains(args, e) for e in expected), (args, expected)
    for doc in plain + _docs(backend, plan, "dynamo")[:-1]:
        if doc["kind"] == "ConfigMap":
            for fname, text in doc["data"].items():
                assert fname in configs
                if "disagg" not in fname:  # the router's file listens on every interface
                    assert text == configs[fname]


@pytest.mark.parametrize(("backend", "plan"), CASES)
def test_plain_lines_parse_with_the_engines_argument_list(backend: str, plan: str) -> None:
    for name, pod in _pods(_docs(backend, plan, "plain")):
        words = pod["containers"][0]["command"]
        if words[0] in ("/bin/sh", "/usr/sbin/sshd") or "router" in name:
            continue
        if words[0] == "mpirun":  # the engine's words follow the MPI launcher
            words = words[words.index("trtllm-llmapi-launch") + 1 :]
        tool = next(
            t for t in ea.tools(backend) if _contains(words, ea.program(backend, t).split())
        )
        program = ea.program(backend, tool).split()
        ea.parse_command(backend, tool, words[len(program) :])


def test_kubelet_expands_nothing() -> None:
    assert kube_word("/models/$(HOME)/x") == "/models/$$(HOME)/x"
    assert kube_word("plain") == "plain"


def test_gpu_product_label_form() -> None:
    """GPU feature discovery's sanitise: drop odd characters, join words with '-'."""
    assert gfd_label("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert gfd_label("NVIDIA  A100-SXM4-80GB (x)") == "NVIDIA-A100-SXM4-80GB-x"
    with pytest.raises(PlannerInputError, match="nvidia.com/gpu.product"):
        product_labels("mi300x")


def test_writes_nothing_over_existing_files(tmp_path: Path) -> None:
    files = build_k8s(parse_plan(PLANS["disagg"]()), "sglang")
    written = write_k8s(files, tmp_path / "out")
    assert sorted(p.name for p in written) == ["dynamo.yaml", "plain.yaml"]
    assert (tmp_path / "out" / "k8s" / "plain.yaml").read_text() == files[1].text
    with pytest.raises(PlannerInputError, match="not empty"):
        write_k8s(files, tmp_path / "out")
    write_k8s(files, tmp_path / "out", force=True)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "k8s").symlink_to(target)
    with pytest.raises(PlannerInputError):
        write_k8s(files, tmp_path / "linked")
    assert list(target.iterdir()) == []


def test_refused_plan_writes_nothing(tmp_path: Path) -> None:
    plan = PLANS["agg-single-host"]()
    plan["best"]["deployment"]["gpu"] = "mi300x"
    plan["gpu"] = "mi300x"
    with pytest.raises(PlannerInputError):
        write_k8s(build_k8s(parse_plan(plan), "vllm"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from planner.cli.main import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_emit_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--target k8s`` writes the two manifests; the default is still the bundle; a GPU without
    a product label is one line on stderr, exit 2, nothing written."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLANS["agg-two-hosts"]()))
    rc, out, _ = _main(
        capsys,
        "emit",
        "--plan",
        str(plan),
        "--backend",
        "sglang",
        "--target",
        "k8s",
        "--out",
        str(tmp_path / "k8s-out"),
    )
    assert rc == 0
    assert sorted(p.name for p in (tmp_path / "k8s-out" / "k8s").iterdir()) == [
        "dynamo.yaml",
        "plain.yaml",
    ]
    assert out.count("\n") == 2
    rc, _, _ = _main(
        capsys, "emit", "--plan", str(plan), "--backend", "sglang", "--out", str(tmp_path / "b")
    )
    assert rc == 0 and (tmp_path / "b" / "launch.sh").exists()
    bad = PLANS["agg-single-host"]()
    bad["gpu"] = bad["best"]["deployment"]["gpu"] = "mi300x"
    plan.write_text(json.dumps(bad))
    rc, _, err = _main(
        capsys,
        "emit",
        "--plan",
        str(plan),
        "--backend",
        "vllm",
        "--target",
        "k8s",
        "--out",
        str(tmp_path / "c"),
    )
    assert rc == 2 and "nvidia.com/gpu.product" in err and err.count("\n") == 1
    assert not (tmp_path / "c").exists()


def test_names_are_dns_labels_from_the_model() -> None:
    from planner.emitters.k8s import base_name

    plan = PLANS["agg-single-host"]()
    plan["best"]["deployment"]["model"] = "Org/My_Model.V2" + "x" * 80
    name = base_name(parse_plan(plan), "sglang")
    assert DNS_LABEL.match(name) and len(name) <= 40 and name.startswith("org-my-model-v2")
    plan["best"]["deployment"]["model"] = "___"
    with pytest.raises(PlannerInputError, match="DNS-1123"):
        base_name(parse_plan(plan), "_")
