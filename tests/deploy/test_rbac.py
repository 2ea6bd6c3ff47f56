"""The ClusterRoles grant exactly what the code calls (tests/deploy/rbac_scan.py derives it), no more, no less,
and each pod runs as the identity whose role covers its code."""

from __future__ import annotations

import pytest

from tests.deploy import rbac_scan
from tests.deploy.kustomize import OVERLAYS, find, pod_spec, render
from tests.deploy.rbac_scan import Attr, ScanError, Site, attributes, granted, run_site, scan_source

ROLES = {"web": "gpu-portal-web", "worker": "gpu-portal-worker"}


@pytest.fixture(scope="module")
def needed() -> dict[str, set[Attr]]:
    return rbac_scan.required()


def _diff(needs: set[Attr], has: set[Attr]) -> str:
    return f"the code calls but the role lacks: {sorted(needs - has)}; the role grants unused: {sorted(has - needs)}"


@pytest.mark.parametrize("identity", ROLES)
def test_each_role_grants_exactly_what_its_code_calls(identity: str, needed: dict[str, set[Attr]]) -> None:
    role = find(render("production"), "ClusterRole", ROLES[identity])
    has = granted(role)
    assert has == needed[identity], _diff(needed[identity], has)


def test_the_scan_sees_the_calls_that_matter(needed: dict[str, set[Attr]]) -> None:
    # Anchors, so a scan that silently found nothing could not pass the equality above with an empty role.
    assert ("", "services/proxy", "get") in needed["worker"]  # telemetry's Jupyter reads
    assert ("", "namespaces", "create") in needed["worker"]  # a team's namespace on its first workspace
    assert ("", "pods/log", "get") in needed["web"]
    assert ("nonResourceURL", "/version", "get") in needed["web"]  # /readyz
    # Nothing is changed in place but nodes, by the worker's MIG repartition loop (cordon, labels), and jobs,
    # by the worker's scheduling cycle scaling an elastic training job (Kube.scale_job).
    changed = {(group, resource, verb) for group, resource, verb in needed["worker"] | needed["web"]
               if verb in ("update", "patch")}  # fmt: skip
    assert changed == {("", "nodes", "patch"), ("batch", "jobs", "patch")}
    assert not {(group, resource, verb) for group, resource, verb in needed["web"] if verb == "patch"}
    # Watches are informers': pods and nodes, and DRA's slices and claims (scheduling/live_capacity.py), each
    # listed first.
    informed = {
        ("", "pods"),
        ("", "nodes"),
        ("resource.k8s.io", "resourceslices"),
        ("resource.k8s.io", "resourceclaims"),
    }
    for identity, needs in needed.items():
        watched = {(group, resource) for group, resource, verb in needs if verb == "watch"}
        assert watched <= informed, identity
        assert {(group, resource, "list") for group, resource in watched} <= needs, identity


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_run_as_the_identity_whose_role_covers_them(overlay: str) -> None:
    objects = render(overlay)
    for identity, name in ROLES.items():
        binding = find(objects, "ClusterRoleBinding", name)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "gpu-portal"}]
        assert pod_spec(find(objects, "Deployment", f"gpu-portal-{identity}"))["serviceAccountName"] == name
    # Beat only sends tasks and the migration talks to the database: neither gets an API token.
    for kind, name in (("Deployment", "gpu-portal-beat"), ("Job", "gpu-portal-migrate")):
        spec = pod_spec(find(objects, kind, name))
        assert spec["automountServiceAccountToken"] is False and "serviceAccountName" not in spec
    assert not [o for o in objects if o["kind"] in ("Role", "RoleBinding")]
    assert len([o for o in objects if o["kind"] == "ClusterRole"]) == len(ROLES)


# -- the scan itself can fail ---------------------------------------------------------------------------------


def _attrs(module: str, source: str) -> set[Attr]:
    return {attributes(*request) for site in scan_source(module, source) for request in run_site(site)}


def test_a_new_call_in_the_loops_is_a_new_need() -> None:
    source = (
        "from scheduling.kube.calls import Kube\n"
        "def relabel(kube: Kube, nodes: list[str]) -> None:\n"
        "    kube.patch_node_labels(nodes[0], {'a': None})\n"
        "    kube.delete('PriorityClass', None, 'x')\n"
    )
    assert _attrs("scheduling/loops/new.py", source) == {
        ("", "nodes", "patch"),
        ("scheduling.k8s.io", "priorityclasses", "delete"),
    }


def test_an_informer_is_its_list_and_watch_charged_to_whoever_starts_it() -> None:
    assert rbac_scan.informer_calls() == ("list_with_version", "watch")  # read off scheduling/kube/informer.py
    worker = (
        "from scheduling.kube import informer\n"
        "from scheduling.kube.calls import Kube\n"
        "def cycle(kube: Kube) -> None:\n"
        "    informer.informer_for(kube, 'Pod').drain()\n"
        "    informer.Informer(kube, kind='Node').start()\n"
    )
    assert _attrs("scheduling/loops/new.py", worker) == {
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
    }
    web = (
        "from scheduling.kube.client import kube\n"
        "from scheduling.kube.informer import informer_for\n"
        "def page() -> None:\n"
        "    informer_for(kube(), 'Node').snapshot()\n"
    )
    sites = scan_source("scheduling/views_new.py", web)
    assert {site.identity for site in sites} == {"web"}  # not refused as a Kube handed to another function
    assert {attributes(*request) for site in sites for request in run_site(site)} == {
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
    }


def test_a_kube_received_as_a_parameter_outside_the_loops_is_the_workers() -> None:
    # Web code may not hand over the Kube it made, so a function given one runs in the worker (the cycle
    # hands its Kube to scheduling/live_capacity.py); its calls, an informer's included, are the worker's.
    source = (
        "from scheduling.kube.calls import Kube\n"
        "from scheduling.kube.client import kube\n"
        "from scheduling.kube.informer import informer_for\n"
        "def capacity(kube: Kube) -> None:\n"
        "    informer_for(kube, 'Pod')\n"
        "    kube.list('Node', None)\n"
        "def page() -> None:\n"
        "    kube().list('Node', None)\n"
    )
    sites = scan_source("scheduling/capacity_new.py", source)
    assert {(site.method, site.identity) for site in sites} == {
        ("list_with_version", "worker"),
        ("watch", "worker"),
        ("list", "worker"),
        ("list", "web"),
    }


def test_a_kind_in_a_variable_stands_for_every_kind_the_module_names() -> None:
    source = (
        "from scheduling.kube.client import kube\n"
        "def sweep() -> None:\n"
        "    client = kube()\n"
        "    for kind in ('Secret', 'Service'):\n"
        "        client.list(kind, None)\n"
    )
    (site,) = scan_source("scheduling/views_new.py", source)
    assert site == Site("scheduling/views_new.py", 5, "list", ("Secret", "Service"), False)
    assert site.identity == "web"


def test_direct_client_calls_map_through_the_clients_own_paths() -> None:
    source = (
        "from kubernetes import client\n"
        "def f(api) -> None:\n"
        "    core = client.CoreV1Api(api)\n"
        "    core.list_namespaced_pod('ns', watch=True)\n"
        "    core.read_namespaced_pod_log('p', 'ns')\n"
        "    core.connect_get_namespaced_service_proxy_with_path('s:80', 'ns', 'api')\n"
        "    client.BatchV1Api(api).delete_collection_namespaced_job('ns')\n"
    )
    assert _attrs("scheduling/kube/new.py", source) == {
        ("", "pods", "watch"),
        ("", "pods/log", "get"),
        ("", "services/proxy", "get"),
        ("batch", "jobs", "deletecollection"),
    }


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("workspaces/x.py", "from kubernetes import client\nclient.CoreV1Api().list_node()\n"),
        ("scheduling/kube/x.py", "def f(c) -> None:\n    c.call_api('/api/v1/nodes', 'GET')\n"),
        ("scheduling/views_x.py", "from scheduling.loops import reconcile\nreconcile.reconcile(kube())\n"),
        ("scheduling/views_x.py", "def f() -> None:\n    k = kube()\n    k.list('Pod', None)\n    g(k)\n"),
        ("scheduling/loops/x.py", "def f(kube: Kube) -> None:\n    kube.list('Deployment', None)\n"),
    ],
    ids=["api-outside-kube", "raw-call-api", "web-hands-off-a-kube", "web-hands-off-a-kube-it-made", "unknown-kind"],
)
def test_code_the_scan_cannot_attribute_fails_loudly(module: str, source: str) -> None:
    with pytest.raises(ScanError):
        scan_source(module, source)


@pytest.mark.parametrize(
    ("method", "url", "query", "expected"),
    [
        ("GET", "https://k/api/v1/pods", [("labelSelector", "a=b")], ("", "pods", "list")),
        ("GET", "https://k/api/v1/namespaces/ns/pods", [("watch", True)], ("", "pods", "watch")),
        ("GET", "https://k/api/v1/namespaces/ns", [], ("", "namespaces", "get")),
        ("POST", "https://k/api/v1/namespaces", [], ("", "namespaces", "create")),
        ("GET", "https://k/api/v1/namespaces/ns/services/nb:8888/proxy/a/b", [], ("", "services/proxy", "get")),
        ("DELETE", "https://k/apis/batch/v1/namespaces/ns/jobs/j", [], ("batch", "jobs", "delete")),
        ("PATCH", "https://k/api/v1/nodes/n", [], ("", "nodes", "patch")),
        ("GET", "https://k/version/", [], ("nonResourceURL", "/version", "get")),
    ],
)
def test_requests_read_as_the_api_server_reads_them(
    method: str, url: str, query: list[tuple[str, object]], expected: Attr
) -> None:
    assert attributes(method, url, query) == expected
