"""`python -m scheduling.benchmarks.validation`: microseconds per object that `check_schema` spends
on valid pods and Jobs shaped as the simulated cluster sees them.

The objects are the portal's own manifests (scheduling/kube/manifests.py), the pods the Job controller
POSTs for them, and the stored (defaulted) pods and Jobs that replace and patch validate again.
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import replace
from typing import Any, Literal
from unittest import mock

from kubernetes import client

from scheduling.kube import manifests
from scheduling.kube.spec import GpuRequest, WorkspaceSpec
from scheduling.simcluster import jobs, schemas
from scheduling.simcluster.api import Cluster
from scheduling.simcluster.clock import SimClock
from scheduling.simcluster.resources import JOBS, NAMESPACES, PODS, ResourceType, for_kind
from scheduling.simcluster.validation import check_schema

JSON = dict[str, Any]

_GPU = GpuRequest("nvidia.com/gpu", 1, {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "exclusive")
_BASE = WorkspaceSpec(
    workspace_id=1,
    name="ws",
    kind="job",
    team_slug="bench",
    owner="alice",
    image="nvcr.io/nvidia/pytorch:25.09-py3",
    command=("python", "train.py"),
    env={"EPOCHS": "3"},
    gpu=_GPU,
    cpu_millis=4000,
    memory_mib=16384,
    workers=1,
    max_runtime_seconds=3600,
    home_volume_gib=10,
)


def _specs() -> Iterator[WorkspaceSpec]:
    """Notebooks and jobs, with and without GPUs, one to four workers, some pinned to a node."""
    for i in itertools.count():
        kind: Literal["notebook", "job"] = "notebook" if i % 3 == 0 else "job"
        yield replace(
            _BASE,
            workspace_id=i,
            name=f"ws{i}",
            kind=kind,
            command=() if kind == "notebook" else ("python", "train.py"),
            gpu=None if i % 4 == 1 else _GPU,
            workers=1 if kind == "notebook" else 1 + i % 4,
            pin_node="gpu-0001" if i % 5 == 2 else None,
        )


def _as_dict(model: Any) -> JSON:
    data: JSON = client.ApiClient().sanitize_for_serialization(model)
    return data


def _rtype(obj: JSON) -> ResourceType:
    rtype = for_kind(obj["apiVersion"], obj["kind"])
    assert rtype is not None, obj["kind"]
    return rtype


def realistic_objects() -> Iterator[tuple[ResourceType, JSON]]:
    """Valid objects without end: each workspace's manifests as POSTed and as stored (defaulted), and
    the pods the Job controller POSTs for its Jobs."""
    cluster = Cluster(clock=SimClock(speed=1.0), seed=1)
    rng = random.Random(1)
    namespaces: set[str] = set()
    for spec in _specs():
        for model in manifests.objects_for(spec, token="t" * 32):
            body = _as_dict(model)
            rtype, namespace = _rtype(body), body["metadata"]["namespace"]
            if namespace not in namespaces:
                namespaces.add(namespace)
                yield NAMESPACES, cluster.create(NAMESPACES, "", _as_dict(manifests.make_namespace(spec.team_slug)))
            stored = cluster.create(rtype, namespace, body)
            yield rtype, body
            yield rtype, stored
            if rtype is JOBS:
                actions = jobs.reconcile_job(stored, [], cluster.clock.now(), rng=rng)
                yield from ((PODS, pod) for pod in actions.create_pods)


def objects(count: int, kinds: tuple[str, ...] = ("Pod", "Job")) -> list[tuple[ResourceType, JSON]]:
    """The first `count` realistic objects of these kinds."""
    wanted = (item for item in realistic_objects() if item[0].kind in kinds)
    return list(itertools.islice(wanted, count))


def time_check_schema(items: list[tuple[ResourceType, JSON]], repeat: int = 3) -> float:
    """Best-of-`repeat` microseconds per object."""
    for rtype, obj in items[:20]:
        check_schema(obj, rtype)  # load and compile outside the timing
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for rtype, obj in items:
            check_schema(obj, rtype)
        best = min(best, time.perf_counter() - start)
    return best / len(items) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5, help="passes over the objects; the best one counts")
    parser.add_argument("--full", action="store_true", help="time the full jsonschema path (no quick check)")
    args = parser.parse_args()
    items = objects(args.objects)
    kinds = {kind: sum(1 for r, _ in items if r.kind == kind) for kind in ("Pod", "Job")}
    with mock.patch.object(schemas, "quick_check", lambda *_: schemas.unsure) if args.full else nullcontext():
        micros = time_check_schema(items, args.repeat)
    path = "full jsonschema path" if args.full else "quick check"
    print(f"check_schema ({path}) over {len(items)} valid objects {kinds}: {micros:.1f} µs per object")


if __name__ == "__main__":
    main()
