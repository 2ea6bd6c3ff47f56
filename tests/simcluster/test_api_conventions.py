"""REST conventions through the official client: Status bodies, resourceVersion, patches, names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.simcluster.conftest import pod_manifest, wait_for


def _status(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    assert (body["kind"], body["apiVersion"], body["status"]) == ("Status", "v1", "Failure")
    assert body["code"] == exc.status
    return body


def test_it_answers_404_with_the_real_message(v1, namespace):
    with pytest.raises(ApiException) as caught:
        v1.read_namespaced_pod("nope", namespace)

    body = _status(caught.value)
    assert (body["reason"], body["message"]) == ("NotFound", 'pods "nope" not found')
    assert body["details"] == {"name": "nope", "kind": "pods"}


def test_it_answers_404_for_a_missing_namespace_and_grouped_kinds(v1, batch):
    with pytest.raises(ApiException) as caught:
        v1.create_namespaced_pod("no-such-ns", pod_manifest("x"))
    assert _status(caught.value)["message"] == 'namespaces "no-such-ns" not found'
    with pytest.raises(ApiException) as caught:
        batch.read_namespaced_job("x", "default")
    assert _status(caught.value)["message"] == 'jobs.batch "x" not found'


def test_it_answers_409_already_exists(v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("twice"))
    with pytest.raises(ApiException) as caught:
        v1.create_namespaced_pod(namespace, pod_manifest("twice"))

    body = _status(caught.value)
    assert (body["reason"], body["message"]) == ("AlreadyExists", 'pods "twice" already exists')


def test_it_refuses_a_stale_update_with_409_conflict(v1, namespace):
    v1.create_namespaced_config_map(namespace, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    first = v1.read_namespaced_config_map("cm", namespace)
    first.data = {"a": "2"}
    updated = v1.replace_namespaced_config_map("cm", namespace, first)
    assert int(updated.metadata.resource_version) > int(first.metadata.resource_version)

    first.data = {"a": "3"}
    with pytest.raises(ApiException) as caught:
        v1.replace_namespaced_config_map("cm", namespace, first)

    body = _status(caught.value)
    assert body["reason"] == "Conflict"
    assert body["message"].startswith('Operation cannot be fulfilled on configmaps "cm": the object has been modified')


def test_it_rejects_unknown_fields_like_strict_decoding(api, namespace):
    body = pod_manifest("typo")
    body["spec"]["containers"][0]["imagePullPolicey"] = "Always"
    with pytest.raises(ApiException) as caught:
        api.call_api(
            f"/api/v1/namespaces/{namespace}/pods",
            "POST",
            body=body,
            auth_settings=["BearerToken"],
            header_params={"Content-Type": "application/json"},
            _preload_content=False,
        )

    status = _status(caught.value)
    assert status["reason"] == "BadRequest"
    assert status["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.containers[0].imagePullPolicey"'
    )


def test_it_reports_invalid_names_and_missing_fields_as_422_causes(v1, namespace):
    body = pod_manifest("Bad_Name")
    del body["spec"]["containers"][0]["image"]
    with pytest.raises(ApiException) as caught:
        v1.create_namespaced_pod(namespace, body)

    status = _status(caught.value)
    fields = {c["field"]: c["reason"] for c in status["details"]["causes"]}
    assert fields == {"metadata.name": "FieldValueInvalid", "spec.containers[0].image": "FieldValueRequired"}
    assert status["message"].startswith('Pod "Bad_Name" is invalid: [')


def test_it_generates_names(v1, namespace):
    body = pod_manifest("")
    body["metadata"] = {"generateName": "nb-"}
    pod = v1.create_namespaced_pod(namespace, body)
    assert pod.metadata.name.startswith("nb-") and len(pod.metadata.name) == 8
    assert pod.metadata.uid and pod.metadata.creation_timestamp


def test_it_refuses_an_unknown_priority_class(v1, namespace):
    with pytest.raises(ApiException) as caught:
        v1.create_namespaced_pod(namespace, pod_manifest("prio", priorityClassName="gold"))

    body = _status(caught.value)
    assert (caught.value.status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == 'pods "prio" is forbidden: no PriorityClass with name gold was found'


def test_it_rejects_a_bad_selector_with_400(v1, namespace):
    with pytest.raises(ApiException) as caught:
        v1.list_namespaced_pod(namespace, field_selector="spec.foo=bar")
    assert _status(caught.value)["message"] == "field label not supported: spec.foo"


def test_it_applies_strategic_merge_json_merge_and_json_patches(v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("patched", nodeName="cpu-0"))

    # Strategic merge: containers merge by name, so only the image changes.
    v1.patch_namespaced_pod("patched", namespace, {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}})
    pod = v1.read_namespaced_pod("patched", namespace)
    assert [(c.name, c.image) for c in pod.spec.containers] == [("main", "busybox:1.37")]

    # JSON patch (a list body).
    v1.patch_namespaced_pod("patched", namespace, [{"op": "add", "path": "/metadata/labels", "value": {"a": "1"}}])
    # JSON merge patch, with null deleting a key.
    v1.api_client.call_api(
        f"/api/v1/namespaces/{namespace}/pods/patched",
        "PATCH",
        body={"metadata": {"labels": {"a": None, "b": "2"}}},
        auth_settings=["BearerToken"],
        header_params={"Content-Type": "application/merge-patch+json"},
    )
    assert v1.read_namespaced_pod("patched", namespace).metadata.labels == {"b": "2"}


def test_it_forbids_pod_spec_changes_beyond_the_mutable_fields(v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("fixed", activeDeadlineSeconds=600))
    with pytest.raises(ApiException) as caught:
        v1.patch_namespaced_pod("fixed", namespace, {"spec": {"restartPolicy": "Always"}})
    assert _status(caught.value)["details"]["causes"][0]["field"] == "spec"

    with pytest.raises(ApiException) as caught:
        v1.patch_namespaced_pod("fixed", namespace, {"spec": {"activeDeadlineSeconds": 900}})
    assert "must be less than or equal to previous value" in _status(caught.value)["message"]
    v1.patch_namespaced_pod("fixed", namespace, {"spec": {"activeDeadlineSeconds": 300}})


def test_it_keeps_status_apart_from_spec(v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("split"))
    v1.patch_namespaced_pod("split", namespace, {"status": {"message": "ignored"}})
    assert v1.read_namespaced_pod("split", namespace).status.message is None

    v1.patch_namespaced_pod_status("split", namespace, {"status": {"message": "written"}})
    assert v1.read_namespaced_pod_status("split", namespace).status.message == "written"


def test_it_binds_persistent_volume_claims_at_once_and_allocates_service_ips(v1, namespace):
    claim = {
        "metadata": {"name": "home"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
    }
    pvc = v1.create_namespaced_persistent_volume_claim(namespace, claim)
    assert pvc.status.phase == "Bound"
    assert pvc.status.capacity == {"storage": "10Gi"}

    svc = v1.create_namespaced_service(namespace, {"metadata": {"name": "nb"}, "spec": {"ports": [{"port": 80}]}})
    assert svc.spec.cluster_ip.startswith("10.96.")
    assert svc.spec.ports[0].target_port == 80


def test_it_serves_events_through_both_api_groups(api, v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("seen"))
    # The scheduler records its events asynchronously: wait for the first rather than race it.
    core = wait_for(
        lambda: (found := v1.list_namespaced_event(namespace, field_selector="involvedObject.name=seen")).items
        and found,
        what="an event about the pod",
    )

    events = client.EventsV1Api(api).list_namespaced_event(namespace)

    assert {e.note for e in events.items} >= {e.message for e in core.items}
    assert all(e.regarding.name == "seen" for e in events.items)


def test_it_manages_priority_classes(api):
    scheduling = client.SchedulingV1Api(api)
    scheduling.create_priority_class({"metadata": {"name": "gpu-interactive"}, "value": 1000})
    assert scheduling.read_priority_class("gpu-interactive").preemption_policy == "PreemptLowerPriority"
    with pytest.raises(ApiException) as caught:
        scheduling.create_priority_class({"metadata": {"name": "too-high"}, "value": 2_000_000_000})
    assert caught.value.status == 422
    scheduling.delete_priority_class("gpu-interactive")
