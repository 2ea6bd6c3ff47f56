"""Encodings kept between watchers and lists (scheduling/simcluster/encoding.py): the bytes are those of a
fresh encoding, a new version of an object is never answered with the old one's, and what is kept is bounded."""

from __future__ import annotations

import json
from typing import Any

from scheduling.simcluster.encoding import Encodings, dumps


def pod(name: str, version: str, phase: str = "Pending") -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "resourceVersion": version}, "status": {"phase": phase}}


def test_events_and_lists_are_the_bytes_of_a_fresh_encoding() -> None:
    encodings = Encodings()
    a, b = pod("a", "3"), pod("b", "4", "Running")
    assert encodings.event("MODIFIED", a) == dumps({"type": "MODIFIED", "object": a}) + b"\n"
    head = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "4"}}
    assert encodings.listing(head, [a, b]) == dumps({**head, "items": [a, b]})
    assert json.loads(encodings.listing(head, []))["items"] == []


def test_an_object_written_again_is_encoded_again() -> None:
    encodings = Encodings()
    a = pod("a", "3")
    first = encodings.object(a)
    assert encodings.object(a) is first  # kept: encoded once for every watcher
    a["status"]["phase"] = "Running"  # as if changed and stored again, which gives it a new version
    a["metadata"]["resourceVersion"] = "5"
    assert json.loads(encodings.object(a))["status"]["phase"] == "Running"
    other = pod("a", "3")  # equal to what was kept, but another object
    assert encodings.object(other) == dumps(other)


def test_it_keeps_only_the_most_recent_and_nothing_without_a_version() -> None:
    encodings = Encodings(size=2)
    pods = [pod(str(i), str(i)) for i in range(3)]
    kept = [encodings.object(p) for p in pods]
    assert encodings.object(pods[0]) is not kept[0]  # dropped when the third came
    assert encodings.object(pods[2]) is kept[2]
    answer = {"kind": "Status", "metadata": {}}
    assert encodings.object(answer) is not encodings.object(answer)
