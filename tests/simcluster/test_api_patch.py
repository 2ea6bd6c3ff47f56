"""The patch formats and server-side printing, as pure functions."""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.simcluster import patch, tables
from scheduling.simcluster.errors import ApiError

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x"]},
    "spec": {
        "containers": [
            {"name": "main", "image": "i:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "side", "image": "s:1"},
        ],
        "tolerations": [{"key": "k", "operator": "Exists"}],
    },
}


def test_strategic_merge_patch_merges_lists_by_their_merge_key():
    patched = patch.strategic_merge_patch(
        POD, {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]}}, "v1", "Pod"
    )
    main, side = patched["spec"]["containers"]
    assert main == {"name": "main", "image": "i:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    assert side == {"name": "side", "image": "s:1"}


def test_strategic_merge_patch_replaces_atomic_lists_and_honours_directives():
    patched = patch.strategic_merge_patch(
        POD,
        {
            "metadata": {"labels": {"a": None, "b": "2"}, "finalizers": ["y"]},
            "spec": {
                "tolerations": [{"key": "z", "operator": "Exists"}],
                "containers": [{"name": "side", "$patch": "delete"}],
            },
        },
        "v1",
        "Pod",
    )
    assert patched["metadata"]["labels"] == {"b": "2"}
    assert patched["metadata"]["finalizers"] == ["x", "y"]  # a merged set of primitives
    assert patched["spec"]["tolerations"] == [{"key": "z", "operator": "Exists"}]
    assert [c["name"] for c in patched["spec"]["containers"]] == ["main"]
    assert POD["metadata"]["labels"] == {"a": "1"}  # the input is left alone


def test_json_merge_patch_replaces_lists_and_deletes_nulls():
    patched = patch.merge_patch(POD, {"spec": {"containers": [{"name": "only", "image": "o"}]}, "status": None})
    assert patched["spec"]["containers"] == [{"name": "only", "image": "o"}]
    assert patched["spec"]["tolerations"] == POD["spec"]["tolerations"]


def test_json_patch_applies_operations_in_order_and_tests_values():
    ops = [
        {"op": "replace", "path": "/spec/containers/0/image", "value": "i:2"},
        {"op": "add", "path": "/metadata/labels/c~1d", "value": "3"},
        {"op": "remove", "path": "/spec/tolerations"},
        {"op": "copy", "from": "/metadata/name", "path": "/metadata/generateName"},
        {"op": "test", "path": "/spec/containers/0/image", "value": "i:2"},
    ]
    patched = patch.json_patch(POD, ops)
    assert patched["spec"]["containers"][0]["image"] == "i:2"
    assert patched["metadata"]["labels"]["c/d"] == "3"
    assert "tolerations" not in patched["spec"]
    assert patched["metadata"]["generateName"] == "p"
    with pytest.raises(ApiError) as caught:
        patch.json_patch(POD, [{"op": "remove", "path": "/spec/nothing"}])
    assert caught.value.code == 422


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (5, "5s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 + 120, "3h2m"),
        (9 * 3600, "9h"),
        (3 * 86400 + 3600, "3d1h"),
        (400 * 86400, "400d"),
    ],
)
def test_ages_read_like_kubectls(seconds, shown):
    assert tables.human_duration(seconds) == shown
