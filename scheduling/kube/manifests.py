"""Kubernetes objects for a workspace, built by pure functions (no I/O, no Django).

Each builder returns a ``kubernetes.client`` model with ``apiVersion`` and ``kind`` set, ready for
:class:`scheduling.kube.calls.Kube`. Facts about GPUs come from ``shared/design/GPU-ON-KUBERNETES.md``
(cited as "GPU doc <section>").

Choices worth knowing:

- **restartPolicy Never, notebooks included.** A bare pod with ``Always`` restarts a crashed or
  shut-down Jupyter server in place (and into CrashLoopBackOff) while holding its GPU; with ``Never``
  the pod ends Succeeded/Failed, the GPU is freed at once and the portal decides what happens next
  (resume is a new pod on the same volume). The kubelet enforces ``activeDeadlineSeconds`` either way.
- **Guaranteed QoS.** CPU and memory limits equal requests: GPU work is the most expensive to lose,
  and Guaranteed pods are evicted last under node pressure.
- **GPUs in limits only**: requests default to limits, and extended resources are integers that
  cannot be overcommitted (GPU doc 1.5).
- **An MPS share is one replica in limits and nothing else**: ``nvidia.com/gpu: 1`` (``nvidia.com/gpu.shared``
  when renamed), as for time-slicing. The device plugin's MPS control daemon sets each replica's memory and
  compute cap (GPU doc 1.3); users cannot set ``CUDA_*`` variables to change them (``spec.GPU_ENV_PREFIXES``).
- **Readiness is a TCP check on 8888**: it needs no token and does not count as Jupyter activity.
- **Training jobs fail as a whole**: ``backoffLimit: 0`` on an Indexed Job, so the first failed worker
  fails the Job and the controller stops the others. Distributed training cannot carry on with a
  worker missing, and retrying is the portal's decision, not the Job controller's.
- **A headless Service only for jobs of several workers**: it gives each worker the DNS name
  ``<job>-<index>.<service>`` to find the master by; a single worker is its own master (``localhost``),
  so most jobs (one worker) cost two objects, not three, to create and to remove.
- **Home volume for jobs**: the home PVC is ReadWriteOnce, i.e. mountable from one node only. It is
  mounted when all pods are certain to share a node (notebooks, single-worker jobs, jobs pinned to a
  node); multi-node jobs run without it and get no PVC (see :func:`mounts_home`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduling.kube import names
from scheduling.kube.keys import (
    GPU_TAINT_KEY,
    HOSTNAME,
    MANAGED_BY,
    MANAGER,
    MASTER_PORT,
    NOTEBOOK_PORT,
    SIM_BUSY_ANNOTATION,
    SIM_DURATION_ANNOTATION,
    SIM_GPU_MEMORY_ANNOTATION,
    SIM_PROFILE_ANNOTATION,
    TEAM,
)
from scheduling.kube.models import k8s
from scheduling.kube.spec import REPLICA_SHARING, DeviceClaim, WorkspaceSpec, env_name_problem

NOTEBOOK_HOME = "/home/jovyan"  # the docker-stacks user's home
JOB_HOME = "/workspace/home"
TOKEN_KEY = "token"  # noqa: S105 - the key inside the Secret, not a secret
JOB_TTL_SECONDS = 3600  # finished Jobs linger an hour so the reconcile loop and the logs page see them
# The docker-stacks user (jovyan, uid 1000) and group (users, gid 100).
RUN_AS_USER = 1000
RUN_AS_GROUP = 100
CLAIM_ENTRY = "gpu"  # a DRA pod's resourceClaims entry, its container's claim reference and the request's name

Model = Any  # kubernetes.client models are untyped


# -- checks (defence in depth: the portal validates first) --------------------------------------------


def check_spec(spec: WorkspaceSpec) -> None:
    """Raise ValueError for a spec no builder should turn into objects."""
    for env_name in spec.env:
        problem = env_name_problem(env_name)
        if problem:
            raise ValueError(problem)
    if spec.cpu_millis < 1 or spec.memory_mib < 1:
        raise ValueError("cpu and memory must be positive")
    if spec.max_runtime_seconds < 1:
        raise ValueError("max runtime must be positive")
    if spec.home_volume_gib < 1:
        raise ValueError("home volume size must be positive")
    if spec.workers < 1 or (spec.kind == "notebook" and spec.workers != 1):
        raise ValueError("a notebook has exactly one worker, a job at least one")
    gpu = spec.gpu
    if gpu is not None:
        if gpu.count < 1:
            raise ValueError("GPU count must be a positive integer (GPU doc 1.5)")
        if gpu.sharing in REPLICA_SHARING and gpu.count != 1:
            # failRequestsGreaterThanOne: the kubelet would refuse the pod at admission (GPU doc 1.3).
            raise ValueError(f"a {gpu.sharing} GPU request asks for exactly one replica")
        if gpu.claim is not None and gpu.claim.count != gpu.count:
            raise ValueError("a DRA claim asks for the request's GPU count")


def mounts_home(spec: WorkspaceSpec) -> bool:
    """Whether the workspace's pods mount the ReadWriteOnce home volume (all on one node)."""
    return spec.kind == "notebook" or (spec.workers == 1 and spec.elastic is None) or spec.pin_node is not None


# -- shared pieces ----------------------------------------------------------------------------------


def _meta(spec: WorkspaceSpec, name: str, annotations: Mapping[str, str] | None = None) -> Model:
    return k8s.V1ObjectMeta(
        name=name,
        namespace=names.namespace_for(spec.team_slug),
        labels=names.common_labels(spec),
        annotations=dict(annotations) if annotations else None,
    )


def _sim_annotations(spec: WorkspaceSpec) -> dict[str, str]:
    annotations = {}
    if spec.workload_profile:
        annotations[SIM_PROFILE_ANNOTATION] = spec.workload_profile
    if spec.simulated_duration_seconds is not None:
        annotations[SIM_DURATION_ANNOTATION] = str(spec.simulated_duration_seconds)
    if spec.simulated_busy_seconds is not None:
        annotations[SIM_BUSY_ANNOTATION] = str(spec.simulated_busy_seconds)
    if spec.simulated_gpu_memory_mib is not None:
        annotations[SIM_GPU_MEMORY_ANNOTATION] = str(spec.simulated_gpu_memory_mib)
    return annotations


def _resources(spec: WorkspaceSpec) -> Model:
    cpu_memory = {"cpu": f"{spec.cpu_millis}m", "memory": f"{spec.memory_mib}Mi"}
    limits = dict(cpu_memory)
    if spec.gpu is not None and spec.gpu.claim is not None:
        # DRA: the GPU comes with the pod's claim, not as an extended resource (facts doc 4.2).
        claims = [k8s.CoreV1ResourceClaim(name=CLAIM_ENTRY)]
        return k8s.V1ResourceRequirements(requests=cpu_memory, limits=limits, claims=claims)
    if spec.gpu is not None:
        limits[spec.gpu.resource_name] = str(spec.gpu.count)
    return k8s.V1ResourceRequirements(requests=cpu_memory, limits=limits)


def _env(spec: WorkspaceSpec, extra: list[Model]) -> list[Model]:
    env = [k8s.V1EnvVar(name=k, value=v) for k, v in sorted(spec.env.items())]
    if spec.gpu is None:
        # Without it a CUDA image may see every GPU of the node (GPU doc 5, 9.6).
        env.append(k8s.V1EnvVar(name="NVIDIA_VISIBLE_DEVICES", value="void"))
    return env + extra


def _container_security() -> Model:
    return k8s.V1SecurityContext(
        allow_privilege_escalation=False,
        capabilities=k8s.V1Capabilities(drop=["ALL"]),
        privileged=False,
        read_only_root_filesystem=False,  # Jupyter and pip write under the image's paths
        run_as_non_root=True,
    )


def _pod_security() -> Model:
    return k8s.V1PodSecurityContext(
        run_as_non_root=True,
        run_as_user=RUN_AS_USER,
        run_as_group=RUN_AS_GROUP,
        fs_group=RUN_AS_GROUP,
        fs_group_change_policy="OnRootMismatch",  # skip the recursive chown of a large home on resume
        seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
    )


def _affinity(spec: WorkspaceSpec) -> Model | None:
    if spec.pin_node is None:
        return None
    term = k8s.V1NodeSelectorTerm(
        match_expressions=[k8s.V1NodeSelectorRequirement(key=HOSTNAME, operator="In", values=[spec.pin_node])]
    )
    return k8s.V1Affinity(
        node_affinity=k8s.V1NodeAffinity(
            required_during_scheduling_ignored_during_execution=k8s.V1NodeSelector(node_selector_terms=[term])
        )
    )


def _volumes(spec: WorkspaceSpec, home_path: str) -> tuple[list[Model], list[Model]]:
    volumes = [k8s.V1Volume(name="tmp", empty_dir=k8s.V1EmptyDirVolumeSource())]
    mounts = [k8s.V1VolumeMount(name="tmp", mount_path="/tmp")]  # noqa: S108 - a private emptyDir
    if mounts_home(spec):
        volumes.insert(
            0,
            k8s.V1Volume(
                name="home",
                persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(claim_name=names.home_pvc_name(spec)),
            ),
        )
        mounts.insert(0, k8s.V1VolumeMount(name="home", mount_path=home_path))
    return volumes, mounts


def _pod_spec(spec: WorkspaceSpec, container: Model, volumes: list[Model], **extra: Any) -> Model:
    gpu = spec.gpu
    if gpu is not None and gpu.claim is not None:
        # One claim per pod from the team's template; the resourceclaim controller makes it and the
        # garbage collector removes it with the pod.
        template = gpu.claim.template_name
        extra["resource_claims"] = [k8s.V1PodResourceClaim(name=CLAIM_ENTRY, resource_claim_template_name=template)]
    return k8s.V1PodSpec(
        containers=[container],
        volumes=volumes,
        restart_policy="Never",
        security_context=_pod_security(),
        automount_service_account_token=False,  # workspaces have no business with the API server
        enable_service_links=False,  # no env vars for every service in the team namespace
        node_selector=dict(gpu.node_selector) if gpu and gpu.node_selector else None,
        tolerations=(
            [k8s.V1Toleration(key=GPU_TAINT_KEY, operator="Exists", effect="NoSchedule")] if gpu else None
        ),  # GPU nodes are tainted nvidia.com/gpu with a value that varies (GPU doc 5)
        affinity=_affinity(spec),
        priority_class_name=spec.priority_class,
        **extra,
    )


# -- objects ----------------------------------------------------------------------------------------


def make_claim_template(team_slug: str, claim: DeviceClaim) -> Model:
    """The ResourceClaimTemplate a DRA offering's pods name (facts doc 4.4), one per distinct claim in the
    team's namespace: shared by every workspace that asks alike, so it is ensured once and never deleted
    with a workspace."""
    selectors = [k8s.V1DeviceSelector(cel=k8s.V1CELDeviceSelector(expression=claim.selector))]
    request = k8s.V1ExactDeviceRequest(
        device_class_name=claim.device_class, count=claim.count, selectors=selectors if claim.selector else None
    )
    return k8s.V1ResourceClaimTemplate(
        api_version="resource.k8s.io/v1",
        kind="ResourceClaimTemplate",
        metadata=k8s.V1ObjectMeta(
            name=claim.template_name,
            namespace=names.namespace_for(team_slug),
            labels={MANAGED_BY: MANAGER, "app.kubernetes.io/part-of": MANAGER},
        ),
        spec=k8s.V1ResourceClaimTemplateSpec(
            spec=k8s.V1ResourceClaimSpec(
                devices=k8s.V1DeviceClaim(requests=[k8s.V1DeviceRequest(name=CLAIM_ENTRY, exactly=request)])
            )
        ),
    )


def make_namespace(team_slug: str) -> Model:
    return k8s.V1Namespace(
        api_version="v1",
        kind="Namespace",
        metadata=k8s.V1ObjectMeta(
            name=names.namespace_for(team_slug),
            labels={
                TEAM: names.label_value(team_slug),
                MANAGED_BY: MANAGER,
                "pod-security.kubernetes.io/enforce": "restricted",
            },
        ),
    )


def make_home_pvc(spec: WorkspaceSpec) -> Model:
    """The home volume; it outlives stopped pods and is deleted only with the workspace."""
    return k8s.V1PersistentVolumeClaim(
        api_version="v1",
        kind="PersistentVolumeClaim",
        metadata=_meta(spec, names.home_pvc_name(spec)),
        spec=k8s.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=k8s.V1VolumeResourceRequirements(requests={"storage": f"{spec.home_volume_gib}Gi"}),
            storage_class_name=spec.storage_class,
        ),
    )


def make_token_secret(spec: WorkspaceSpec, token: str) -> Model:
    """The Jupyter token, read by the pod through a secretKeyRef so it never appears in the pod spec."""
    return k8s.V1Secret(
        api_version="v1",
        kind="Secret",
        metadata=_meta(spec, names.token_secret_name(spec)),
        type="Opaque",
        string_data={TOKEN_KEY: token},
    )


def _normalise_base_url(base_url: str) -> str:
    return "/" + base_url.strip("/") + "/" if base_url.strip("/") else "/"


def make_notebook_pod(spec: WorkspaceSpec, *, base_url: str) -> Model:
    """A Jupyter server pod (docker-stacks images: ENTRYPOINT tini, so ``args`` replaces the CMD)."""
    check_spec(spec)
    if spec.kind != "notebook":
        raise ValueError("make_notebook_pod needs a notebook spec")
    volumes, mounts = _volumes(spec, NOTEBOOK_HOME)
    token = k8s.V1EnvVar(
        name="JUPYTER_TOKEN",
        value_from=k8s.V1EnvVarSource(
            secret_key_ref=k8s.V1SecretKeySelector(name=names.token_secret_name(spec), key=TOKEN_KEY)
        ),
    )
    container = k8s.V1Container(
        name="notebook",
        image=spec.image,
        args=[
            "start-notebook.py",
            "--ServerApp.ip=0.0.0.0",
            f"--ServerApp.port={NOTEBOOK_PORT}",
            f"--ServerApp.base_url={_normalise_base_url(base_url)}",
        ],
        ports=[k8s.V1ContainerPort(name="http", container_port=NOTEBOOK_PORT, protocol="TCP")],
        env=_env(spec, [token]),
        resources=_resources(spec),
        readiness_probe=k8s.V1Probe(
            tcp_socket=k8s.V1TCPSocketAction(port="http"), period_seconds=5, failure_threshold=3
        ),
        security_context=_container_security(),
        volume_mounts=mounts,
    )
    return k8s.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=_meta(spec, names.base_name(spec), _sim_annotations(spec)),
        spec=_pod_spec(spec, container, volumes, active_deadline_seconds=spec.max_runtime_seconds),
    )


def make_notebook_service(spec: WorkspaceSpec) -> Model:
    return k8s.V1Service(
        api_version="v1",
        kind="Service",
        metadata=_meta(spec, names.base_name(spec)),
        spec=k8s.V1ServiceSpec(
            type="ClusterIP",
            selector=names.selector_labels(spec),
            ports=[k8s.V1ServicePort(name="http", port=NOTEBOOK_PORT, target_port="http", protocol="TCP")],
        ),
    )


def make_notebook_ingress(
    spec: WorkspaceSpec, *, host: str, path: str, tls_secret: str | None = None, ingress_class: str | None = None
) -> Model:
    """Publishes a notebook at ``https://<host><path>`` on a real cluster; Jupyter serves under ``path``."""
    backend = k8s.V1IngressBackend(
        service=k8s.V1IngressServiceBackend(name=names.base_name(spec), port=k8s.V1ServiceBackendPort(name="http"))
    )
    rule = k8s.V1IngressRule(
        host=host,
        http=k8s.V1HTTPIngressRuleValue(paths=[k8s.V1HTTPIngressPath(path=path, path_type="Prefix", backend=backend)]),
    )
    return k8s.V1Ingress(
        api_version="networking.k8s.io/v1",
        kind="Ingress",
        metadata=_meta(spec, names.base_name(spec)),
        spec=k8s.V1IngressSpec(
            ingress_class_name=ingress_class,
            rules=[rule],
            tls=[k8s.V1IngressTLS(hosts=[host], secret_name=tls_secret)] if tls_secret else None,
        ),
    )


def make_priority_class(name: str, value: int, description: str) -> Model:
    """A cluster-wide priority level for the portal's pods; lower levels are preempted first."""
    return k8s.V1PriorityClass(
        api_version="scheduling.k8s.io/v1",
        kind="PriorityClass",
        metadata=k8s.V1ObjectMeta(name=name, labels={MANAGED_BY: MANAGER}),
        value=value,
        global_default=False,
        preemption_policy="PreemptLowerPriority",
        description=description,
    )


def needs_headless_service(spec: WorkspaceSpec) -> bool:
    """Whether the job's workers need a Service to find each other by name: only when there are (or, for an
    elastic job, may come to be) several."""
    return spec.kind == "job" and max(spec.workers, spec.elastic[1] if spec.elastic else 1) > 1


def make_headless_service(spec: WorkspaceSpec) -> Model:
    """Gives each worker the DNS name ``<job>-<index>.<service>``; ready or not, so workers that start
    first can already resolve the master."""
    return k8s.V1Service(
        api_version="v1",
        kind="Service",
        metadata=_meta(spec, names.base_name(spec)),
        spec=k8s.V1ServiceSpec(
            cluster_ip="None",
            selector=names.selector_labels(spec),
            publish_not_ready_addresses=True,
            ports=[k8s.V1ServicePort(name="rendezvous", port=MASTER_PORT, protocol="TCP")],
        ),
    )


def make_training_job(spec: WorkspaceSpec) -> Model:
    """An Indexed Job with one pod per worker, all-or-nothing (see the module docstring)."""
    check_spec(spec)
    if spec.kind != "job":
        raise ValueError("make_training_job needs a job spec")
    base = names.base_name(spec)
    service = base if needs_headless_service(spec) else ""  # the headless service shares the Job's name
    volumes, mounts = _volumes(spec, JOB_HOME)
    index = k8s.V1EnvVar(
        name="RANK",
        value_from=k8s.V1EnvVarSource(
            field_ref=k8s.V1ObjectFieldSelector(
                field_path="metadata.annotations['batch.kubernetes.io/job-completion-index']"
            )
        ),
    )
    master = f"{base}-0.{service}" if service else "localhost"
    distributed = [
        k8s.V1EnvVar(name="WORLD_SIZE", value=str(spec.workers)),
        index,
        k8s.V1EnvVar(name="MASTER_ADDR", value=master),
        k8s.V1EnvVar(name="MASTER_PORT", value=str(MASTER_PORT)),
    ]
    if spec.elastic is not None:
        # PyTorch elastic: torchrun reads its options from PET_* variables; the world size changes as the job
        # grows and shrinks (each change restarts the rendezvous), so there is no fixed WORLD_SIZE. Worker 0's
        # name is the c10d rendezvous endpoint: index 0 is never scaled away.
        distributed = [
            k8s.V1EnvVar(name="PET_NNODES", value=f"{spec.elastic[0]}:{spec.elastic[1]}"),
            k8s.V1EnvVar(name="PET_RDZV_BACKEND", value="c10d"),
            k8s.V1EnvVar(name="PET_RDZV_ENDPOINT", value=f"{master}:{MASTER_PORT}"),
            k8s.V1EnvVar(name="PET_RDZV_ID", value=base),
            k8s.V1EnvVar(name="PET_MAX_RESTARTS", value="100"),
            index,
            k8s.V1EnvVar(name="MASTER_ADDR", value=master),
            k8s.V1EnvVar(name="MASTER_PORT", value=str(MASTER_PORT)),
        ]
    container = k8s.V1Container(
        name="worker",
        image=spec.image,
        command=list(spec.command) or None,  # empty: the image's own entrypoint
        ports=[k8s.V1ContainerPort(name="rendezvous", container_port=MASTER_PORT, protocol="TCP")],
        env=_env(spec, distributed),
        resources=_resources(spec),
        security_context=_container_security(),
        volume_mounts=mounts,
    )
    template = k8s.V1PodTemplateSpec(
        metadata=k8s.V1ObjectMeta(labels=names.common_labels(spec), annotations=_sim_annotations(spec) or None),
        spec=_pod_spec(spec, container, volumes, subdomain=service or None),
    )
    return k8s.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=_meta(spec, base),
        spec=k8s.V1JobSpec(
            completion_mode="Indexed",
            completions=spec.workers,
            parallelism=spec.workers,
            backoff_limit=0,
            active_deadline_seconds=spec.max_runtime_seconds,
            ttl_seconds_after_finished=JOB_TTL_SECONDS,
            template=template,
        ),
    )


def objects_for(spec: WorkspaceSpec, *, token: str | None = None, base_url: str = "/") -> list[Model]:
    """Every namespaced object of a workspace, in creation order (the namespace comes separately).

    Notebooks: home PVC, token secret, pod, service. Jobs: home PVC (when mounted), headless service (for
    several workers), Job; the service goes first so workers resolve each other from their first second.
    """
    check_spec(spec)
    home = [make_home_pvc(spec)] if mounts_home(spec) else []
    if spec.kind == "notebook":
        if not token:
            raise ValueError("a notebook needs a Jupyter token")
        return [
            *home,
            make_token_secret(spec, token),
            make_notebook_pod(spec, base_url=base_url),
            make_notebook_service(spec),
        ]
    service = [make_headless_service(spec)] if needs_headless_service(spec) else []
    return [*home, *service, make_training_job(spec)]
