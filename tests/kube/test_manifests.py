"""Manifest builders, tested as dicts (one test per feature) and against the strict 1.34 schemas."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from kubernetes.client import ApiClient

from scheduling.kube import manifests
from scheduling.kube.spec import GpuRequest, env_name_problem
from tests.kube import H100, make_spec

api = ApiClient()


def as_dict(obj: Any) -> dict[str, Any]:
    data: dict[str, Any] = api.sanitize_for_serialization(obj)
    return data


def pod_spec(obj: Any) -> dict[str, Any]:
    """The pod spec of a Pod or of a Job's template."""
    data = as_dict(obj)
    spec: dict[str, Any] = data["spec"]["template"]["spec"] if data["kind"] == "Job" else data["spec"]
    return spec


def container(obj: Any) -> dict[str, Any]:
    (only,) = pod_spec(obj)["containers"]
    assert isinstance(only, dict)
    return only


def env_of(obj: Any) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(obj).get("env", [])}


LABELS = {
    "app.kubernetes.io/name": "gpu-workspace",
    "app.kubernetes.io/instance": "ws-42-nb",
    "app.kubernetes.io/component": "notebook",
    "app.kubernetes.io/managed-by": "gpu-portal",
    "app.kubernetes.io/part-of": "gpu-portal",
    "gpuportal.io/workspace-id": "42",
    "gpuportal.io/team": "alpha",
    "gpuportal.io/owner": "alice",
}
SELECTOR = {"app.kubernetes.io/name": "gpu-workspace", "app.kubernetes.io/instance": "ws-42-nb"}


# -- whole objects ----------------------------------------------------------------------------------


def test_make_notebook_pod():
    pod = manifests.make_notebook_pod(make_spec(), base_url="/user/alice/ws-42/")
    assert as_dict(pod) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ws-42-nb", "namespace": "team-alpha", "labels": LABELS},
        "spec": {
            "activeDeadlineSeconds": 28800,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "restartPolicy": "Never",
            "nodeSelector": H100,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "runAsGroup": 100,
                "fsGroup": 100,
                "fsGroupChangePolicy": "OnRootMismatch",
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "notebook",
                    "image": "quay.io/jupyter/pytorch-notebook:cuda12-2025-10-20",
                    "args": [
                        "start-notebook.py",
                        "--ServerApp.ip=0.0.0.0",
                        "--ServerApp.port=8888",
                        "--ServerApp.base_url=/user/alice/ws-42/",
                    ],
                    "ports": [{"name": "http", "containerPort": 8888, "protocol": "TCP"}],
                    "env": [
                        {
                            "name": "JUPYTER_TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": "ws-42-nb-token", "key": "token"}},
                        }
                    ],
                    "resources": {
                        "requests": {"cpu": "4000m", "memory": "32768Mi"},
                        "limits": {"cpu": "4000m", "memory": "32768Mi", "nvidia.com/gpu": "1"},
                    },
                    "readinessProbe": {
                        "tcpSocket": {"port": "http"},
                        "periodSeconds": 5,
                        "failureThreshold": 3,
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                        "privileged": False,
                        "readOnlyRootFilesystem": False,
                        "runAsNonRoot": True,
                    },
                    "volumeMounts": [
                        {"name": "home", "mountPath": "/home/jovyan"},
                        {"name": "tmp", "mountPath": "/tmp"},
                    ],
                }
            ],
            "volumes": [
                {"name": "home", "persistentVolumeClaim": {"claimName": "ws-42-home"}},
                {"name": "tmp", "emptyDir": {}},
            ],
        },
    }


def test_make_notebook_service():
    assert as_dict(manifests.make_notebook_service(make_spec())) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "ws-42-nb", "namespace": "team-alpha", "labels": LABELS},
        "spec": {
            "type": "ClusterIP",
            "selector": SELECTOR,
            "ports": [{"name": "http", "port": 8888, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def test_make_home_pvc():
    assert as_dict(manifests.make_home_pvc(make_spec(storage_class="fast-ssd"))) == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "ws-42-home", "namespace": "team-alpha", "labels": LABELS},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "20Gi"}},
            "storageClassName": "fast-ssd",
        },
    }


def test_home_pvc_without_storage_class_uses_the_cluster_default():
    assert "storageClassName" not in as_dict(manifests.make_home_pvc(make_spec()))["spec"]


def test_home_pvc_name_survives_stop_and_resume():
    """Resume rebuilds the objects from the same workspace: the claim name must not change."""
    first = as_dict(manifests.make_home_pvc(make_spec()))["metadata"]["name"]
    again = as_dict(manifests.make_notebook_pod(make_spec(), base_url="/"))["spec"]["volumes"][0]
    assert again["persistentVolumeClaim"]["claimName"] == first


def test_make_token_secret():
    assert as_dict(manifests.make_token_secret(make_spec(), "s3cret")) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "ws-42-nb-token", "namespace": "team-alpha", "labels": LABELS},
        "type": "Opaque",
        "stringData": {"token": "s3cret"},
    }


def test_token_never_appears_in_the_pod():
    objects = manifests.objects_for(make_spec(), token="s3cret-token-value", base_url="/")
    pod = next(o for o in objects if o.kind == "Pod")
    assert "s3cret-token-value" not in str(as_dict(pod))


def test_make_namespace():
    assert as_dict(manifests.make_namespace("alpha")) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "team-alpha",
            "labels": {
                "gpuportal.io/team": "alpha",
                "app.kubernetes.io/managed-by": "gpu-portal",
                "pod-security.kubernetes.io/enforce": "restricted",
            },
        },
    }


def test_make_headless_service():
    spec = make_spec(kind="job", workers=2)
    assert as_dict(manifests.make_headless_service(spec)) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "ws-42-nb",
            "namespace": "team-alpha",
            "labels": {**LABELS, "app.kubernetes.io/component": "training"},
        },
        "spec": {
            "clusterIP": "None",
            "selector": SELECTOR,
            "publishNotReadyAddresses": True,
            "ports": [{"name": "rendezvous", "port": 29500, "protocol": "TCP"}],
        },
    }


def test_make_training_job():
    spec = make_spec(kind="job", workers=2, max_runtime_seconds=7200)
    job = as_dict(manifests.make_training_job(spec))
    template = job["spec"].pop("template")
    assert job["apiVersion"] == "batch/v1"
    assert job["kind"] == "Job"
    assert job["metadata"]["name"] == "ws-42-nb"
    assert job["spec"] == {
        "completionMode": "Indexed",
        "completions": 2,
        "parallelism": 2,
        "backoffLimit": 0,
        "activeDeadlineSeconds": 7200,
        "ttlSecondsAfterFinished": 3600,
    }
    assert template["metadata"] == {"labels": {**LABELS, "app.kubernetes.io/component": "training"}}
    assert template["spec"]["restartPolicy"] == "Never"
    assert template["spec"]["subdomain"] == "ws-42-nb"
    (worker,) = template["spec"]["containers"]
    assert worker["name"] == "worker"
    assert worker["command"] == ["python", "train.py"]
    assert "args" not in worker


def test_job_workers_find_each_other():
    env = env_of(manifests.make_training_job(make_spec(kind="job", workers=4)))
    assert env["WORLD_SIZE"] == "4"
    assert env["MASTER_ADDR"] == "ws-42-nb-0.ws-42-nb"  # <job>-<index>.<headless service>
    assert env["MASTER_PORT"] == "29500"
    assert env["RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }


def test_a_single_worker_is_its_own_master():
    template = as_dict(manifests.make_training_job(make_spec(kind="job", workers=1)))["spec"]["template"]
    env = env_of(manifests.make_training_job(make_spec(kind="job", workers=1)))
    assert (env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("1", "localhost")
    assert "subdomain" not in template["spec"]  # no headless service to be a subdomain of


def test_job_without_command_runs_the_image_entrypoint():
    assert "command" not in container(manifests.make_training_job(make_spec(kind="job", command=())))


# -- features ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "limit"),
    [
        (GpuRequest("nvidia.com/gpu", 8, H100, "exclusive"), {"nvidia.com/gpu": "8"}),
        (GpuRequest("nvidia.com/mig-3g.40gb", 1, {}, "mig"), {"nvidia.com/mig-3g.40gb": "1"}),
        (GpuRequest("nvidia.com/gpu.shared", 1, {}, "time-sliced"), {"nvidia.com/gpu.shared": "1"}),
    ],
)
def test_gpus_are_integers_in_limits_only(gpu, limit):
    """GPU doc 1.5: requests default to limits; a fraction or a request without a limit is invalid."""
    resources = container(manifests.make_notebook_pod(make_spec(gpu=gpu), base_url="/"))["resources"]
    assert resources["limits"] == {"cpu": "4000m", "memory": "32768Mi", **limit}
    assert resources["requests"] == {"cpu": "4000m", "memory": "32768Mi"}


def test_cpu_only_pod_hides_the_gpus_and_needs_no_toleration():
    pod = manifests.make_notebook_pod(make_spec(gpu=None), base_url="/")
    assert env_of(pod)["NVIDIA_VISIBLE_DEVICES"] == "void"  # GPU doc 5, 9.6
    assert "tolerations" not in pod_spec(pod)
    assert "nodeSelector" not in pod_spec(pod)
    assert container(pod)["resources"]["limits"] == {"cpu": "4000m", "memory": "32768Mi"}


def test_gpu_pod_does_not_set_nvidia_visible_devices():
    assert "NVIDIA_VISIBLE_DEVICES" not in env_of(manifests.make_notebook_pod(make_spec(), base_url="/"))


@pytest.mark.parametrize(
    "name", ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_VISIBLE_DEVICES", "JUPYTER_TOKEN"]
)
@pytest.mark.parametrize("kind", ["notebook", "job"])
def test_env_that_steers_gpus_or_shadows_ours_is_refused(name, kind):
    spec = make_spec(kind=kind, env={"OK": "1", name: "all"})
    assert env_name_problem(name)
    with pytest.raises(ValueError, match=name):
        manifests.objects_for(spec, token="t", base_url="/")


def test_user_env_comes_sorted_before_ours():
    spec = make_spec(env={"B": "2", "A": "1"})
    names = [e["name"] for e in container(manifests.make_notebook_pod(spec, base_url="/"))["env"]]
    assert names == ["A", "B", "JUPYTER_TOKEN"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gpu": GpuRequest("nvidia.com/gpu", 0, H100, "exclusive")}, "positive integer"),
        ({"gpu": GpuRequest("nvidia.com/gpu", 2, {}, "time-sliced")}, "exactly one replica"),
        ({"workers": 2}, "exactly one worker"),
        ({"cpu_millis": 0}, "positive"),
        ({"max_runtime_seconds": 0}, "positive"),
    ],
)
def test_impossible_specs_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        manifests.make_notebook_pod(make_spec(**changes), base_url="/")


def test_builders_refuse_the_wrong_kind():
    with pytest.raises(ValueError, match="notebook spec"):
        manifests.make_notebook_pod(make_spec(kind="job"), base_url="/")
    with pytest.raises(ValueError, match="job spec"):
        manifests.make_training_job(make_spec())


@pytest.mark.parametrize(
    ("base_url", "expected"), [("/", "/"), ("", "/"), ("/proxy/ws-42", "/proxy/ws-42/"), ("a/b/", "/a/b/")]
)
def test_base_url_is_normalised(base_url, expected):
    args = container(manifests.make_notebook_pod(make_spec(), base_url=base_url))["args"]
    assert args[-1] == f"--ServerApp.base_url={expected}"


def test_pin_node_becomes_required_node_affinity():
    pod = manifests.make_notebook_pod(make_spec(pin_node="gpu-h100-1"), base_url="/")
    assert pod_spec(pod)["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-h100-1"]}
                        ]
                    }
                ]
            }
        }
    }


def test_no_affinity_without_pin_node():
    assert "affinity" not in pod_spec(manifests.make_notebook_pod(make_spec(), base_url="/"))


def test_priority_class():
    pod = manifests.make_notebook_pod(make_spec(priority_class="gpu-interactive"), base_url="/")
    assert pod_spec(pod)["priorityClassName"] == "gpu-interactive"


def test_simulated_cluster_annotations():
    spec = make_spec(kind="job", workload_profile="steady-training", simulated_duration_seconds=90)
    job = as_dict(manifests.make_training_job(spec))
    assert job["spec"]["template"]["metadata"]["annotations"] == {
        "sim.gpuportal.io/workload-profile": "steady-training",
        "sim.gpuportal.io/duration-seconds": "90",
    }
    assert "annotations" not in job["metadata"]
    pod = as_dict(manifests.make_notebook_pod(make_spec(workload_profile="idle-notebook"), base_url="/"))
    assert pod["metadata"]["annotations"] == {"sim.gpuportal.io/workload-profile": "idle-notebook"}


def test_no_host_access_and_no_privilege():
    for obj in (
        manifests.make_notebook_pod(make_spec(), base_url="/"),
        manifests.make_training_job(make_spec(kind="job", workers=2)),
    ):
        spec = pod_spec(obj)
        assert not {"hostNetwork", "hostPID", "hostIPC", "nodeName", "runtimeClassName"} & spec.keys()
        assert all("hostPath" not in v for v in spec["volumes"])
        security = container(obj)["securityContext"]
        assert security["privileged"] is False
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize(
    ("workers", "pin_node", "mounted"), [(1, None, True), (2, None, False), (2, "gpu-h100-0", True)]
)
def test_jobs_mount_the_read_write_once_home_only_on_one_node(workers, pin_node, mounted):
    spec = make_spec(kind="job", workers=workers, pin_node=pin_node)
    job = manifests.make_training_job(spec)
    mounts = {m["name"]: m["mountPath"] for m in container(job)["volumeMounts"]}
    assert mounts == ({"home": "/workspace/home", "tmp": "/tmp"} if mounted else {"tmp": "/tmp"})
    kinds = [o.kind for o in manifests.objects_for(spec)]
    # One worker is its own master: no headless service to find the others by.
    assert kinds == (["PersistentVolumeClaim"] if mounted else []) + (["Service"] if workers > 1 else []) + ["Job"]


def test_objects_for_a_notebook():
    objects = manifests.objects_for(make_spec(), token="t", base_url="/")
    assert [(o.kind, o.metadata.name) for o in objects] == [
        ("PersistentVolumeClaim", "ws-42-home"),
        ("Secret", "ws-42-nb-token"),
        ("Pod", "ws-42-nb"),
        ("Service", "ws-42-nb"),
    ]


def test_objects_for_a_notebook_need_a_token():
    with pytest.raises(ValueError, match="token"):
        manifests.objects_for(make_spec(), base_url="/")


def test_builders_are_deterministic():
    spec = make_spec(kind="job", workers=2, env={"Z": "1", "A": "2"})
    assert [as_dict(o) for o in manifests.objects_for(spec)] == [as_dict(o) for o in manifests.objects_for(spec)]


@pytest.mark.parametrize(("kind", "workers"), [("notebook", 1), ("job", 2)])
def test_names_stay_short_for_a_very_long_workspace_name(kind, workers):
    spec = make_spec(
        kind=kind, workers=workers, name="x" * 200, team_slug="t" * 100, owner="o" * 100, workspace_id=10**12
    )
    for obj in [manifests.make_namespace(spec.team_slug), *manifests.objects_for(spec, token="t")]:
        data = as_dict(obj)
        assert len(data["metadata"]["name"]) <= 63
        assert all(len(v) <= 63 for v in data["metadata"]["labels"].values())
        kubernetes_validate.validate(data, "1.34.0", strict=True)
    if kind == "job":
        assert len(f"{manifests.make_training_job(spec).metadata.name}-99") <= 63  # a worker's hostname


# -- every offering against the strict 1.34 schemas ---------------------------------------------------

A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
H200 = {"nvidia.com/gpu.product": "NVIDIA-H200"}
L40S_SHARED = {"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"}
L40S = {"nvidia.com/gpu.product": "NVIDIA-L40S"}

OFFERINGS = {
    "h100x1": GpuRequest("nvidia.com/gpu", 1, H100, "exclusive"),
    "h100x2": GpuRequest("nvidia.com/gpu", 2, H100, "exclusive"),
    "h100x4": GpuRequest("nvidia.com/gpu", 4, H100, "exclusive"),
    "h100x8": GpuRequest("nvidia.com/gpu", 8, H100, "exclusive"),
    "a100-mig-1g.10gb": GpuRequest("nvidia.com/mig-1g.10gb", 1, A100, "mig"),
    "a100-mig-3g.40gb": GpuRequest("nvidia.com/mig-3g.40gb", 1, A100, "mig"),
    "h200-mig-1g.18gb": GpuRequest("nvidia.com/mig-1g.18gb", 1, H200, "mig"),
    "l40s-time-sliced": GpuRequest("nvidia.com/gpu", 1, L40S_SHARED, "time-sliced"),
    "l40s-renamed-shared": GpuRequest("nvidia.com/gpu.shared", 1, L40S, "time-sliced"),
    "cpu-only": None,
}
SHAPES = [("notebook", 1), ("job", 1), ("job", 2)]


@pytest.mark.parametrize(("kind", "workers"), SHAPES, ids=[f"{k}-{w}" for k, w in SHAPES])
@pytest.mark.parametrize("offering", OFFERINGS)
def test_every_object_validates_against_the_strict_schemas(offering, kind, workers):
    spec = make_spec(kind=kind, workers=workers, gpu=OFFERINGS[offering], env={"WANDB_MODE": "offline"})
    objects = [
        manifests.make_namespace(spec.team_slug),
        *manifests.objects_for(spec, token="t", base_url="/x/"),
    ]
    for obj in objects:
        kubernetes_validate.validate(as_dict(obj), "1.34.0", strict=True)


def test_every_optional_field_validates_against_the_strict_schemas():
    spec = make_spec(
        kind="job",
        workers=2,
        name="Fine-tune Llama 3 (run #2)",
        owner="first.last+gpu@example.org",
        team_slug="ML_Research",
        priority_class="gpu-batch",
        pin_node="gpu-h100-0",
        workload_profile="steady-training",
        simulated_duration_seconds=120,
        storage_class="standard",
    )
    for obj in [manifests.make_namespace(spec.team_slug), *manifests.objects_for(spec)]:
        kubernetes_validate.validate(as_dict(obj), "1.34.0", strict=True)
