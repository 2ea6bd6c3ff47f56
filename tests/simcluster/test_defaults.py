"""API-server defaulting, admission and extended-resource validation of pods."""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.simcluster.defaults import (
    AdmissionError,
    FieldError,
    default_pod,
    extended_resource_errors,
    image_pull_policy,
    invalid_message,
    qos_class,
)
from scheduling.simcluster.quantity import QuantityError
from tests.simcluster.test_scheduler import NOW, PRIORITY_CLASSES, assert_valid


def raw_pod(
    limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    container = {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", "resources": resources}
    return {"metadata": {"name": "nb", "namespace": "team-a"}, "spec": {"containers": [container]} | spec}


def defaulted(pod: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return default_pod(pod, uid="0b7c", now=NOW, priority_classes=PRIORITY_CLASSES, **kwargs)


def test_default_pod_fills_what_the_api_server_fills() -> None:
    pod = defaulted(raw_pod(limits={"nvidia.com/gpu": 1, "cpu": "8", "memory": "64Gi"}, priorityClassName="high"))

    assert_valid(pod)
    assert pod["metadata"] == {
        "name": "nb",
        "namespace": "team-a",
        "uid": "0b7c",
        "creationTimestamp": "2026-05-01T09:00:00Z",
    }
    spec = pod["spec"]
    assert {k: spec[k] for k in ("restartPolicy", "dnsPolicy", "schedulerName", "terminationGracePeriodSeconds")} == {
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "terminationGracePeriodSeconds": 30,
    }
    assert (spec["securityContext"], spec["enableServiceLinks"], spec["serviceAccountName"]) == ({}, True, "default")
    assert (spec["priority"], spec["preemptionPolicy"]) == (1000, "PreemptLowerPriority")
    assert spec["tolerations"] == [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    ]
    container = spec["containers"][0]
    assert container["resources"]["requests"] == {"nvidia.com/gpu": 1, "cpu": "8", "memory": "64Gi"}
    assert (container["terminationMessagePath"], container["terminationMessagePolicy"]) == (
        "/dev/termination-log",
        "File",
    )
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert pod["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}


def test_default_pod_does_not_touch_its_input() -> None:
    raw = raw_pod(limits={"cpu": "1"})
    before = repr(raw)
    defaulted(raw)
    assert repr(raw) == before


def test_existing_tolerations_for_node_problems_are_kept() -> None:
    own = {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 30,
    }
    tolerations = defaulted(raw_pod(tolerations=[own]))["spec"]["tolerations"]
    assert [t["key"] for t in tolerations] == ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"]


def test_extended_resource_toleration_plugin() -> None:
    pod = defaulted(raw_pod(limits={"nvidia.com/gpu": 1}), extended_resource_toleration=True)
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]


def test_priority_admission() -> None:
    assert defaulted(raw_pod())["spec"]["priority"] == 0
    assert defaulted(raw_pod(priorityClassName="system-node-critical"))["spec"]["priority"] == 2000001000
    assert defaulted(raw_pod(), global_default_class="standard")["spec"]["priorityClassName"] == "standard"
    never = defaulted(raw_pod(priorityClassName="low"), preemption_policies={"low": "Never"})
    assert never["spec"]["preemptionPolicy"] == "Never"


def test_unknown_priority_class_is_forbidden() -> None:
    with pytest.raises(AdmissionError, match=r"^no PriorityClass with name gpu-vip was found$"):
        defaulted(raw_pod(priorityClassName="gpu-vip"))


def test_hand_set_priority_must_agree_with_the_class() -> None:
    with pytest.raises(AdmissionError) as caught:
        defaulted(raw_pod(priorityClassName="low", priority=5))
    assert str(caught.value) == (
        "the integer value of priority (5) must not be provided in pod spec; priority admission controller "
        "computed 10 from the given PriorityClass name"
    )


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("localhost:5000/team/notebook", "Always"),
        ("localhost:5000/team/notebook:v2", "IfNotPresent"),
        ("nvcr.io/nvidia/pytorch@sha256:" + "a" * 64, "IfNotPresent"),
    ],
)
def test_image_pull_policy(image: str, policy: str) -> None:
    assert image_pull_policy(image) == policy


@pytest.mark.parametrize(
    ("limits", "requests", "qos"),
    [
        (None, None, "BestEffort"),
        ({"nvidia.com/gpu": 1}, None, "BestEffort"),  # only cpu and memory count
        ({"cpu": "1", "memory": "1Gi"}, None, "Guaranteed"),
        ({"cpu": "1", "memory": "1Gi"}, {"cpu": "500m"}, "Burstable"),
        ({"cpu": "1"}, None, "Burstable"),
        (None, {"memory": "1Gi"}, "Burstable"),
    ],
)
def test_qos_class(limits: dict[str, Any] | None, requests: dict[str, Any] | None, qos: str) -> None:
    assert qos_class(raw_pod(limits=limits, requests=requests)) == qos


# ---------------------------------------------------------------------------------------------
# Extended resources


def test_half_a_gpu_is_rejected_twice_like_the_real_server() -> None:
    errors = extended_resource_errors(raw_pod(limits={"nvidia.com/gpu": 0.5}))
    assert errors == [
        FieldError("spec.containers[0].resources.limits[nvidia.com/gpu]", 'Invalid value: "500m": must be an integer'),
        FieldError(
            "spec.containers[0].resources.requests[nvidia.com/gpu]", 'Invalid value: "500m": must be an integer'
        ),
    ]
    assert invalid_message("Pod", "nb", errors) == (
        'Pod "nb" is invalid: [spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": '
        'must be an integer, spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: "500m": '
        "must be an integer]"
    )
    assert errors[0].reason == "FieldValueInvalid"


def test_gpu_requests_must_equal_limits() -> None:
    errors = extended_resource_errors(raw_pod(limits={"nvidia.com/gpu": "2"}, requests={"nvidia.com/gpu": "1"}))
    assert errors == [
        FieldError(
            "spec.containers[0].resources.requests", 'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'
        )
    ]
    assert invalid_message("Pod", "nb", errors) == (
        'Pod "nb" is invalid: spec.containers[0].resources.requests: Invalid value: "1": '
        "must be equal to nvidia.com/gpu limit of 2"
    )


def test_gpu_requests_need_limits() -> None:
    errors = extended_resource_errors(raw_pod(requests={"nvidia.com/mig-1g.10gb": 1}))
    assert errors == [
        FieldError(
            "spec.containers[0].resources.limits", "Required value: Limit must be set for non overcommitable resources"
        )
    ]
    assert errors[0].reason == "FieldValueRequired"


def test_cpu_may_be_overcommitted_but_not_requested_beyond_its_limit() -> None:
    assert extended_resource_errors(raw_pod(limits={"cpu": "2"}, requests={"cpu": "1"})) == []
    assert extended_resource_errors(raw_pod(limits={"cpu": "1"}, requests={"cpu": "2"})) == [
        FieldError(
            "spec.containers[0].resources.requests", 'Invalid value: "2": must be less than or equal to cpu limit of 1'
        )
    ]


def test_other_resource_errors() -> None:
    errors = extended_resource_errors(raw_pod(limits={"gpu": "1", "nvidia.com/gpu": "-1"}))
    base = "spec.containers[0].resources"
    assert [str(e) for e in errors] == [
        f'{base}.limits[gpu]: Invalid value: "gpu": must be a standard resource for containers',
        f'{base}.limits[nvidia.com/gpu]: Invalid value: "-1": must be greater than or equal to 0',
        f'{base}.requests[gpu]: Invalid value: "gpu": must be a standard resource for containers',
        f'{base}.requests[nvidia.com/gpu]: Invalid value: "-1": must be greater than or equal to 0',
    ]


def test_a_valid_gpu_pod_has_no_errors_and_template_paths_can_be_set() -> None:
    assert extended_resource_errors(raw_pod(limits={"nvidia.com/gpu": 2, "cpu": "8"})) == []
    errors = extended_resource_errors(raw_pod(limits={"nvidia.com/gpu": "1.5"}), path="spec.template.spec")
    assert errors[0].field == "spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]"
    assert errors[0].message == 'Invalid value: "1500m": must be an integer'


def test_malformed_quantities_raise_the_decode_error() -> None:
    with pytest.raises(QuantityError, match="quantities must match the regular expression"):
        extended_resource_errors(raw_pod(limits={"nvidia.com/gpu": "one"}))
