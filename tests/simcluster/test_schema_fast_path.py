"""The quick schema check (schemas.quick_check) against jsonschema's Draft 2020-12 validator: it must
never vouch for an object the validator rejects, and check_schema must answer exactly as the full
validator path does (same 400 messages, same 422 causes, same dropped fields)."""

from __future__ import annotations

import copy
import itertools
import random
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

from scheduling.benchmarks.validation import realistic_objects
from scheduling.simcluster import schemas
from scheduling.simcluster.errors import ApiError
from scheduling.simcluster.node_objects import build_cluster_nodes
from scheduling.simcluster.nodes import default_cluster_file, load_cluster_file
from scheduling.simcluster.resources import NODES, PODS, ResourceType, for_kind
from scheduling.simcluster.validation import check_schema

JSON = dict[str, Any]
Path = tuple[str | int, ...]

# Values that trip every keyword: wrong JSON types, null, integral and fractional floats, bools (which
# are not integers), strings that are not in an enum, empty and odd containers.
ODD_VALUES: list[Any] = [None, 0, 7, -1, 1.0, 2.5, True, False, "", "x", "Never", [], ["x"], [None], {}, {"x": 1}]

CRD: JSON = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"kind": "Widget", "plural": "widgets"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {  # JSONSchemaProps is recursive
                        "type": "object",
                        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
                    }
                },
            }
        ],
    },
}


def _rtype(obj: JSON) -> ResourceType:
    rtype = for_kind(obj["apiVersion"], obj["kind"])
    if rtype is None:  # kinds the simulator does not serve still have schemas
        group, version = obj["apiVersion"].split("/")
        return ResourceType(
            group=group, version=version, plural=obj["kind"].lower() + "s", kind=obj["kind"], namespaced=False
        )
    return rtype


def _nodes() -> list[JSON]:
    return build_cluster_nodes(load_cluster_file(default_cluster_file()), created="2025-01-01T00:00:00Z")


@pytest.fixture(scope="module")
def valid_objects() -> list[tuple[ResourceType, JSON]]:
    """Pods, Jobs, Services, PVCs, Secrets, Namespaces as the portal and the Job controller build them
    (as POSTed and as stored), the simulator's Nodes, and a CRD for a recursive schema."""
    items = list(itertools.islice(realistic_objects(), 240))
    items += [(NODES, node) for node in _nodes()[:6]]
    items.append((_rtype(CRD), CRD))
    return items


def _is_valid(obj: Any, rtype: ResourceType) -> bool:
    validator = schemas.validator(rtype.api_version, rtype.kind)
    assert validator is not None
    return bool(validator.is_valid(obj))


def _quick(obj: Any, rtype: ResourceType) -> bool:
    check = schemas.quick_check(rtype.api_version, rtype.kind)
    assert check is not None
    return check(obj)


# -- mutations ----------------------------------------------------------------------------------------


def _paths(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def _at(obj: Any, path: Path) -> Any:
    for part in path:
        obj = obj[part]
    return obj


Edit = tuple[Path, str, Any]  # where, what (set, delete, append), which value


def _edits(obj: JSON) -> list[Edit]:
    """Every single-step corruption: each value replaced by each odd value, an unknown field in each
    object, each field removed (missing required ones among them), odd items appended to each list."""
    edits: list[Edit] = []
    for path, value in _paths(obj):
        if path:
            edits += [(path, "set", odd) for odd in ODD_VALUES if odd != value or type(odd) is not type(value)]
        if isinstance(value, dict):
            edits.append(((*path, "bogusField"), "set", "x"))
            edits += [((*path, key), "delete", None) for key in value]
        if isinstance(value, list):
            edits += [(path, "append", odd) for odd in (None, "x", {}, {"bogusField": 1})]
    return edits


def _apply(obj: JSON, edit: Edit) -> JSON:
    path, action, value = edit
    out = copy.deepcopy(obj)
    if action == "append":
        _at(out, path).append(copy.deepcopy(value))
        return out
    parent = _at(out, path[:-1])
    if action == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(value)
    return out


def _sample(items: list[tuple[ResourceType, JSON]], per_object: int, seed: int) -> list[tuple[ResourceType, JSON]]:
    """A few objects of every kind, then `per_object` mutants of each (a second mutation on some)."""
    rng = random.Random(seed)
    by_kind: dict[str, list[tuple[ResourceType, JSON]]] = {}
    for rtype, obj in items:
        by_kind.setdefault(rtype.kind, []).append((rtype, obj))
    out = []
    for group in by_kind.values():
        for rtype, obj in rng.sample(group, min(3, len(group))):
            edits = _edits(obj)
            for edit in rng.sample(edits, min(per_object, len(edits))):
                mutant = _apply(obj, edit)
                if rng.random() < 0.3 and (more := _edits(mutant)):
                    mutant = _apply(mutant, rng.choice(more))
                out.append((rtype, mutant))
    return out


# -- the quick check against jsonschema ------------------------------------------------------------


def test_realistic_objects_take_the_quick_path(valid_objects: list[tuple[ResourceType, JSON]]) -> None:
    for rtype, obj in valid_objects:
        assert _is_valid(obj, rtype), (rtype.kind, obj)
        assert _quick(obj, rtype), (rtype.kind, obj)


def test_quick_check_agrees_with_jsonschema_on_mutants(valid_objects: list[tuple[ResourceType, JSON]]) -> None:
    mutants = _sample(valid_objects, per_object=150, seed=1)
    invalid = 0
    for rtype, mutant in mutants:
        valid = _is_valid(mutant, rtype)
        invalid += not valid
        # For plain JSON values the quick check is exact; above all it never vouches for an invalid one.
        assert _quick(mutant, rtype) == valid, (rtype.kind, mutant)
    assert len(mutants) > 2000
    assert invalid > len(mutants) // 2  # the mutations do reach the schema's keywords


@pytest.mark.parametrize(
    ("path", "value", "valid"),
    [
        (("spec", "containers", 0, "ports", 0, "containerPort"), 80.0, True),  # an integral float is an integer
        (("spec", "containers", 0, "ports", 0, "containerPort"), 80.5, False),
        (("spec", "containers", 0, "ports", 0, "containerPort"), True, False),  # a bool is not an integer
        (("spec", "containers", 0, "ports", 0, "containerPort"), "80", False),
        (("spec", "containers", 0, "readinessProbe", "tcpSocket", "port"), "http", True),  # IntOrString
        (("spec", "containers", 0, "readinessProbe", "tcpSocket", "port"), 8888, True),
        (("spec", "containers", 0, "readinessProbe", "tcpSocket", "port"), 8888.0, True),
        (("spec", "containers", 0, "readinessProbe", "tcpSocket", "port"), None, False),  # both oneOf branches
        (("spec", "containers", 0, "readinessProbe", "tcpSocket", "port"), 1.5, False),
        (("spec", "containers", 0, "resources", "limits", "cpu"), 2, True),  # Quantity: string or number
        (("spec", "containers", 0, "resources", "limits", "cpu"), 0.5, True),
        (("spec", "containers", 0, "resources", "limits", "cpu"), None, False),
        (("spec", "containers", 0, "resources", "limits", "cpu"), False, False),
        (("kind",), "Job", False),  # enum (only apiVersion and kind have one)
        (("apiVersion",), None, False),
        (("spec", "containers", 0, "bogus"), 1, False),  # unknown field, deep
        (("metadata", "labels", "team"), None, True),  # map values are nullable strings
        (("metadata", "labels", "team"), 1, False),
        (("metadata", "creationTimestamp"), "not a date", True),  # format asserts nothing
        (("spec", "nodeSelector"), None, True),
        (("status",), {"phase": "Running", "bogus": {}}, False),
    ],
)
def test_quick_check_on_corner_cases(path: Path, value: Any, valid: bool) -> None:
    pod = _probe_pod()
    _at(pod, path[:-1])[path[-1]] = value
    assert _is_valid(pod, PODS) is valid
    assert _quick(pod, PODS) is valid


def test_missing_required_field_is_not_vouched_for() -> None:
    pod = _probe_pod()
    del pod["spec"]["containers"][0]["name"]
    assert not _is_valid(pod, PODS)
    assert not _quick(pod, PODS)


def _probe_pod() -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"team": "a"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "ports": [{"containerPort": 80}],
                    "readinessProbe": {"tcpSocket": {"port": "http"}},
                    "resources": {"limits": {"cpu": "1"}},
                }
            ],
        },
    }


def test_unexpected_python_types_take_the_full_path() -> None:
    """A dict subclass is valid to jsonschema; the quick check does not vouch for it but is never wrong."""
    pod = _probe_pod()
    pod["metadata"] = OrderedDict(pod["metadata"])
    assert _is_valid(pod, PODS)
    assert not _quick(pod, PODS)
    pod["spec"]["containers"] = tuple(pod["spec"]["containers"])  # not an array to jsonschema
    assert not _is_valid(pod, PODS)
    assert not _quick(pod, PODS)
    assert check_schema(copy.deepcopy(_probe_pod()), PODS) == []


def test_every_kind_compiles_without_fallbacks_for_valid_objects(
    valid_objects: list[tuple[ResourceType, JSON]],
) -> None:
    for rtype in {rtype for rtype, _ in valid_objects}:
        assert schemas.quick_check(rtype.api_version, rtype.kind) is not None
    assert schemas.quick_check("example.com/v1", "Widget") is None  # no schema: nothing to check


# -- check_schema end to end ---------------------------------------------------------------------------


def _outcome(obj: JSON, rtype: ResourceType, *, strict: bool) -> tuple[Any, JSON]:
    """What check_schema returns or raises, and what it leaves of the object."""
    obj = copy.deepcopy(obj)
    try:
        causes = check_schema(obj, rtype, strict=strict)
    except ApiError as exc:
        return ("error", exc.status()), obj
    return ("causes", [(c.reason, c.message, c.field) for c in causes]), obj


@pytest.mark.parametrize("strict", [True, False])
def test_check_schema_answers_as_the_full_path(valid_objects: list[tuple[ResourceType, JSON]], strict: bool) -> None:
    cases = valid_objects[::4] + _sample(valid_objects, per_object=30, seed=2)
    for rtype, obj in cases:
        quick = _outcome(obj, rtype, strict=strict)
        with mock.patch.object(schemas, "quick_check", lambda *_: schemas.unsure):
            full = _outcome(obj, rtype, strict=strict)
        assert quick == full, (rtype.kind, obj)
