"""Label and field selectors with the API server's semantics and error texts."""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.simcluster.selectors import (
    SelectorError,
    check_field_selector,
    match_fields,
    match_label_selector,
    match_labels,
    match_node_selector_term,
    match_node_selector_terms,
    parse_label_selector,
)

LABELS = {"app": "notebook", "team": "alpha", "gpus": "2", "empty": ""}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("app=notebook", True),
        ("app==notebook", True),
        ("app=training", False),
        ("app!=training", True),
        ("missing!=x", True),  # != also matches a missing label
        ("app in (notebook, training)", True),
        ("app in (training)", False),
        ("app notin (training)", True),
        ("missing notin (x)", True),
        ("team", True),
        ("missing", False),
        ("!missing", True),
        ("!team", False),
        ("app=notebook,team=alpha", True),
        ("app=notebook,team=beta", False),
        ("  app = notebook ,  team  ", True),
        ("empty=", True),
        ("missing=", False),
        ("gpus>1", True),
        ("gpus<2", False),
        ("app>1", False),  # not an integer label
        ("x in (,a)", False),
        ("empty in (,a)", True),
        ("app in (in,notin,notebook)", True),  # keywords are values inside a set
    ],
)
def test_match_labels(selector: str, matches: bool) -> None:
    assert match_labels(selector, LABELS) is matches


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("app in notebook", "unable to parse requirement: found 'notebook' expected: '('"),
        ("app=a=b", "found '=', expected: ',' or 'end of string'"),
        ("!app=a", "found '=', expected: ',' or 'end of string'"),
        (",app", "found ',', expected: !, identifier, or 'end of string'"),
        ("app,", "found '', expected: identifier after ','"),
        ("app notebook", "unable to parse requirement: found 'notebook', expected: in, notin, =, ==, !=, gt, lt"),
        ("app in (a,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
        ("app in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'"),
        ("app in ()x", "found 'x', expected: ',' or 'end of string'"),
        ("gpus>two", "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer"),
        ("=x", "found '=', expected: !, identifier, or 'end of string'"),
    ],
)
def test_bad_label_selectors(selector: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_label_selector(selector)
    assert str(caught.value) == message


def test_bad_label_keys_and_values() -> None:
    with pytest.raises(
        SelectorError, match=r'^unable to parse requirement: key: Invalid value: "-app": name part must'
    ):
        parse_label_selector("-app=x")
    with pytest.raises(SelectorError, match="prefix part a lowercase RFC 1123 subdomain"):
        parse_label_selector("Example.com/app=x")
    with pytest.raises(SelectorError, match="a valid label must be an empty string"):
        parse_label_selector("app=-x")
    with pytest.raises(SelectorError, match="must be no more than 63 characters"):
        parse_label_selector("app=" + "x" * 64)


def test_label_selector_objects() -> None:
    selector = {
        "matchLabels": {"team": "alpha"},
        "matchExpressions": [
            {"key": "app", "operator": "In", "values": ["notebook", "training"]},
            {"key": "paused", "operator": "DoesNotExist"},
        ],
    }
    assert match_label_selector(selector, LABELS)
    assert not match_label_selector(selector, LABELS | {"paused": "true"})
    assert match_label_selector({}, {})  # an empty selector selects everything
    assert not match_label_selector(None, LABELS)  # a missing one selects nothing
    with pytest.raises(SelectorError, match=r'^"Gt" is not a valid label selector operator$'):
        match_label_selector({"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["1"]}]}, LABELS)
    with pytest.raises(SelectorError, match="values set can't be empty"):
        match_label_selector({"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}, LABELS)


NODE: dict[str, Any] = {
    "metadata": {
        "name": "gpu-a",
        "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"},
    }
}


@pytest.mark.parametrize(
    ("expression", "matches"),
    [
        ({"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}, True),
        ({"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": ["NVIDIA-H100-80GB-HBM3"]}, False),
        ({"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["4"]}, True),
        ({"key": "nvidia.com/gpu.count", "operator": "Lt", "values": ["4"]}, False),
        ({"key": "nvidia.com/mig.config", "operator": "DoesNotExist"}, True),
        ({"key": "nvidia.com/gpu.count", "operator": "Exists"}, True),
    ],
)
def test_node_selector_expressions(expression: dict[str, Any], matches: bool) -> None:
    assert match_node_selector_term({"matchExpressions": [expression]}, NODE) is matches


def test_node_selector_terms() -> None:
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-a"]}]}
    other = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["gpu-a"]}]}
    assert match_node_selector_term(by_name, NODE)
    assert not match_node_selector_term(other, NODE)
    assert not match_node_selector_term({}, NODE)  # an empty term matches no node
    assert match_node_selector_terms([other, by_name], NODE)  # terms are ORed
    assert not match_node_selector_terms([], NODE)


POD: dict[str, Any] = {
    "metadata": {"name": "nb-1", "namespace": "team-a"},
    "spec": {"nodeName": "gpu-a", "restartPolicy": "Never", "schedulerName": "default-scheduler"},
    "status": {"phase": "Running", "podIP": "10.244.1.7"},
}
EVENT: dict[str, Any] = {
    "metadata": {"name": "nb-1.18a2b", "namespace": "team-a"},
    "involvedObject": {"kind": "Pod", "name": "nb-1", "namespace": "team-a", "uid": "u1"},
    "reason": "FailedScheduling",
    "type": "Warning",
    "source": {"component": "default-scheduler"},
    "reportingComponent": "default-scheduler",
}


@pytest.mark.parametrize(
    ("selector", "obj", "kind", "matches"),
    [
        ("", POD, "Pod", True),
        ("status.phase=Running", POD, "Pod", True),
        ("status.phase==Running,spec.nodeName!=gpu-b", POD, "pods", True),
        ("status.phase!=Running", POD, "Pod", False),
        ("spec.nodeName=", POD, "Pod", False),
        ("spec.hostNetwork=false", POD, "Pod", True),
        ("status.nominatedNodeName=", POD, "Pod", True),
        ("metadata.name=nb-1,metadata.namespace=team-a", POD, "Pod", True),
        ("involvedObject.name=nb-1,involvedObject.kind=Pod", EVENT, "Event", True),
        ("reason=FailedScheduling,type=Warning", EVENT, "events", True),
        ("source=default-scheduler", EVENT, "Event", True),
        ("spec.unschedulable=true", {"metadata": {"name": "n"}, "spec": {"unschedulable": True}}, "Node", True),
        ("status.successful=0", {"metadata": {"name": "j"}, "status": {}}, "Job", True),
        (r"metadata.name=a\,b", {"metadata": {"name": "a,b"}}, "ConfigMap", True),
    ],
)
def test_match_fields(selector: str, obj: dict[str, Any], kind: str, matches: bool) -> None:
    assert match_fields(selector, obj, kind) is matches


@pytest.mark.parametrize(
    ("selector", "kind", "message"),
    [
        ("spec.containers=x", "Pod", "field label not supported: spec.containers"),
        ("metadata.namespace=x", "Node", "field label not supported: metadata.namespace"),
        ("status.phase", "Pod", "invalid selector: 'status.phase'; can't understand 'status.phase'"),
        (r"metadata.name=a\x", "Pod", r"invalid field selector: invalid escape sequence: \x"),
        ("metadata.name=a=b", "Pod", "invalid field selector: unescaped character in value: 61"),
    ],
)
def test_bad_field_selectors(selector: str, kind: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        check_field_selector(selector, kind)
    assert str(caught.value) == message
