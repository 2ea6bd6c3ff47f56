"""Create and remove a workspace's Kubernetes objects.

Both directions are idempotent (names are derived from the workspace, a 409 on create and a 404 on
delete count as success), so a task redelivered after a worker crash converges on one set of objects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from django.conf import settings
from django.utils import timezone

from portal.queue import enqueue
from scheduling import priorities
from scheduling.demand import spec_for
from scheduling.kube import manifests, names
from scheduling.kube.calls import Kube, KubeError, PermanentKubeError, TransientKubeError
from scheduling.kube.keys import NOTEBOOK_PORT
from scheduling.kube.spec import WorkspaceSpec
from scheduling.loops import tasknames
from workspaces.models import Workspace
from workspaces.tokens import jupyter_token
from workspaces.transitions import Move, State, transition, transition_many

log = logging.getLogger(__name__)


def notebook_base_url(namespace: str, service: str) -> str:
    """Where Jupyter is served: behind the Ingress on a real cluster, else the API server's service proxy."""
    if settings.NOTEBOOK_INGRESS_HOST:
        return f"/ws/{namespace}/{service}/"
    return f"/api/v1/namespaces/{namespace}/services/{service}:{NOTEBOOK_PORT}/proxy/"


def _load(workspace_id: int) -> Workspace | None:
    workspace = Workspace.objects.select_related("team", "owner", "offering").filter(pk=workspace_id).first()
    if workspace is None:
        log.info("workspace %s no longer exists; nothing to do", workspace_id)
    return workspace


CREATED = "Created its objects in the cluster; waiting for a node to start it."


def provision(kube: Kube, workspace_id: int) -> None:
    workspace = _load(workspace_id)
    if workspace is None:
        return
    if workspace.state not in (State.ADMITTED, State.PROVISIONING):
        log.info("workspace %s is %s; nothing to provision", workspace_id, workspace.state)
        return
    failure = _create(kube, workspace)
    if isinstance(failure, TransientKubeError):
        raise failure  # the task retries it with backoff
    if failure is not None:
        _refused(workspace, failure)
        return
    transition(workspace, State.PROVISIONING, CREATED, expected=[State.ADMITTED], source="provisioner")


def provision_many(kube: Kube, workspace_ids: Sequence[int]) -> int:
    """:func:`provision` for the workspaces one scheduling cycle admitted together: rows read in one query,
    objects created ``PROVISION_CONCURRENCY`` workspaces at a time (the API calls overlap instead of queueing
    one behind another), and those created moved on in one update. A workspace whose calls failed for a
    transient reason gets a task of its own, which retries with backoff; one the cluster refused fails with
    the cluster's message. Answers how many were created. Idempotent like :func:`provision`: a batch lost with
    its worker is taken up by the reconcile loop, workspace by workspace."""
    rows = Workspace.objects.select_related("team", "owner", "offering").filter(
        pk__in=list(workspace_ids), state__in=(State.ADMITTED, State.PROVISIONING)
    )
    workspaces = list(rows.order_by("pk"))
    if not workspaces:
        return 0
    for slug in sorted({w.team.slug for w in workspaces}):
        _ensure_shared_objects(kube, slug)  # once here, not once per thread
    with ThreadPoolExecutor(settings.PROVISION_CONCURRENCY, thread_name_prefix="provision") as pool:
        failures = list(pool.map(partial(_create, kube), workspaces))
    created = [workspace for workspace, failure in zip(workspaces, failures, strict=True) if failure is None]
    transition_many(
        [Move(w, CREATED) for w in created if w.state == State.ADMITTED],
        State.PROVISIONING,
        expected=[State.ADMITTED],
        source="provisioner",
    )
    for workspace, failure in zip(workspaces, failures, strict=True):
        if isinstance(failure, TransientKubeError):
            log.info("workspace %s: %s; retrying it on its own", workspace.pk, failure.message)
            enqueue(tasknames.PROVISION, workspace.pk, countdown=1.0)
        elif failure is not None:
            _refused(workspace, failure)
    return len(created)


def _create(kube: Kube, workspace: Workspace) -> KubeError | None:
    """Create the workspace's objects; answers what went wrong, if anything (nothing is raised, so that a
    batch's threads all finish)."""
    spec = spec_for(workspace)
    namespace = names.namespace_for(workspace.team.slug)
    try:
        try:
            _create_objects(kube, workspace, spec, namespace)
        except PermanentKubeError as exc:
            if exc.status not in (403, 404) or not forget_shared():
                raise
            _create_objects(kube, workspace, spec, namespace)  # perhaps a shared object went away
    except KubeError as exc:
        return exc
    return None


def _refused(workspace: Workspace, failure: KubeError) -> None:
    transition(
        workspace,
        State.FAILED,
        f"The cluster refused the workspace: {failure.message}",
        expected=[State.ADMITTED, State.PROVISIONING],
        source="provisioner",
    )


# Cluster-wide objects every workspace needs (the priority classes, its team's namespace) are created once
# per process and then trusted for SHARED_OBJECTS_TTL seconds: sending them again for every workspace
# was five of its eight API calls. If the cluster then refuses a workspace's objects (a namespace or a
# priority class went away: 404 or 403), forget them all and try once more before calling it a refusal.
SHARED_OBJECTS_TTL = 300.0
_shared_ensured: dict[tuple[str, str, str], float] = {}


def _ensure_shared(kube: Kube, obj: Any) -> None:
    key = (obj.kind, obj.metadata.namespace or "", obj.metadata.name)
    if time.monotonic() - _shared_ensured.get(key, -SHARED_OBJECTS_TTL) < SHARED_OBJECTS_TTL:
        return
    kube.ensure(obj)
    _shared_ensured[key] = time.monotonic()


def forget_shared() -> bool:
    """Drop what this process believes exists; True if it believed anything."""
    known = bool(_shared_ensured)
    _shared_ensured.clear()
    return known


def _ensure_shared_objects(kube: Kube, team_slug: str) -> None:
    for priority_class in priorities.priority_class_objects():
        _ensure_shared(kube, priority_class)
    _ensure_shared(kube, manifests.make_namespace(team_slug))


def _create_objects(kube: Kube, workspace: Workspace, spec: WorkspaceSpec, namespace: str) -> None:
    _ensure_shared_objects(kube, workspace.team.slug)
    if spec.gpu is not None and spec.gpu.claim is not None:
        _ensure_shared(kube, manifests.make_claim_template(workspace.team.slug, spec.gpu.claim))
    base_url = notebook_base_url(namespace, names.base_name(spec))
    for obj in manifests.objects_for(spec, token=jupyter_token(workspace), base_url=base_url):
        kube.ensure(obj)
    if settings.NOTEBOOK_INGRESS_HOST and workspace.kind == Workspace.Kind.NOTEBOOK:
        kube.ensure(
            manifests.make_notebook_ingress(
                spec,
                host=settings.NOTEBOOK_INGRESS_HOST,
                path=base_url,
                tls_secret=settings.NOTEBOOK_INGRESS_TLS_SECRET or None,
                ingress_class=settings.NOTEBOOK_INGRESS_CLASS or None,
            )
        )


def request_teardown(workspace_id: int, *, delete_volume: bool) -> None:
    """Owe the removal of the workspace's objects, and ask a worker for it after commit.

    The debt is written down (``teardown_requested_at``) in the caller's transaction, so a task lost with a
    crashed worker or exhausted by a Kubernetes outage does not lose it: the reconcile loop pays it
    (:func:`scheduling.loops.reconcile.finish_lost_teardowns`)."""
    request_teardowns([workspace_id], delete_volume=delete_volume)


def request_teardowns(workspace_ids: Sequence[int], *, delete_volume: bool) -> None:
    """:func:`request_teardown` for many workspaces, the debt written in one statement."""
    if not workspace_ids:
        return
    Workspace.objects.filter(pk__in=workspace_ids, teardown_requested_at__isnull=True).update(
        teardown_requested_at=timezone.now()
    )
    for workspace_id in workspace_ids:
        enqueue(tasknames.TEARDOWN, workspace_id, delete_volume)


def teardown(kube: Kube, workspace_id: int, *, delete_volume: bool) -> None:
    """Delete the workspace's pods and services (and its home volume and token when ``delete_volume``)."""
    workspace = _load(workspace_id)
    if workspace is None:
        return  # the reconcile loop removes what such a workspace left behind
    spec = spec_for(workspace)
    namespace = names.namespace_for(workspace.team.slug)
    base = names.base_name(spec)
    if workspace.kind == Workspace.Kind.JOB:
        kube.delete("Job", namespace, base, propagation="Foreground")
    else:
        kube.delete("Pod", namespace, base)
    kube.delete("Service", namespace, base)
    if settings.NOTEBOOK_INGRESS_HOST:
        kube.delete("Ingress", namespace, base)
    if delete_volume:
        kube.delete("Secret", namespace, names.token_secret_name(spec))
        kube.delete("PersistentVolumeClaim", namespace, names.home_pvc_name(spec))
    # Paid, unless the workspace moved on meanwhile (stopped, then deleted: the delete's teardown is owed).
    # The debt is cleared in the same update as the move to the next state: a worker killed in between
    # would otherwise leave a "stopping" workspace that owes nothing, which nothing would ever finish.
    paid = {"teardown_requested_at": None}
    if workspace.state == State.STOPPING:
        transition(
            workspace, State.STOPPED, "Stopped; the home volume is kept for resuming.", source="provisioner", **paid
        )
    elif workspace.state == State.PREEMPTED:
        transition(
            workspace,
            State.QUEUED,
            "Queued again after preemption, with the same home volume; it starts when capacity allows.",
            source="provisioner",
            **paid,
            preempt_at=None,
            borrowing=False,
            admitted_at=None,
            started_at=None,
            finished_at=None,
            node_name="",
            pinned_node="",
            **workspace.elastic_restart_fields(),  # an elastic job starts again at its minimum
        )
    else:  # expired, deleted, failed ...: their state is already final; only the debt is paid
        Workspace.objects.filter(pk=workspace.pk, state=workspace.state).update(**paid)
