"""The simulated API server authenticates as a real one does (bearer token from its kubeconfig, 401
Status otherwise), and its Jupyter checks the notebook token the pod was started with."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass

import pytest
import yaml
from kubernetes import client

from scheduling.simcluster.testing import SimCluster
from tests.simcluster.conftest import wait_for_phase

NOTEBOOK_TOKEN = "0f3c9a6b2d7e41c58a9b3e6d1f2a4c7e"


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> dict[str, object]:
        return dict(json.loads(self.body))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # show the redirect itself, as a browser's first response


def fetch(sim: SimCluster, path: str, headers: dict[str, str] | None = None) -> Answer:
    """A bare HTTPS request, trusting the simulator's certificate: no client library adds credentials."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=ssl.create_default_context(cadata=sim.ca_pem)), _NoRedirect()
    )
    request = urllib.request.Request(f"{sim.url}{path}", headers=headers or {})  # noqa: S310 - loopback
    try:
        with opener.open(request, timeout=10) as response:
            return Answer(response.status, response.read(), dict(response.headers))
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.read(), dict(exc.headers))


UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


def test_the_kubeconfig_carries_the_token_and_the_ca_the_server_wants(sim: SimCluster, v1: client.CoreV1Api) -> None:
    kubeconfig = yaml.safe_load(sim.kubeconfig_path.read_text())
    assert kubeconfig["users"][0]["user"]["token"] == sim.token
    assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://")
    assert len(v1.list_node().items) == 7
    assert fetch(sim, "/api/v1/nodes", {"Authorization": f"Bearer {sim.token}"}).status == 200


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/api/v1/nodes", {}),
        ("/api/v1/nodes", {"Authorization": "Bearer not-the-token"}),
        ("/apis", {}),
        ("/api/v1/namespaces/default/services/nb:8888/proxy/api/status", {"Authorization": "Bearer wrong"}),
        ("/_sim/faults", {}),
    ],
)
def test_a_call_without_the_token_or_with_a_wrong_one_is_refused_with_a_status(
    sim: SimCluster, path: str, headers: dict[str, str]
) -> None:
    answer = fetch(sim, path, headers)
    assert answer.status == 401
    assert answer.json() == UNAUTHORIZED


def test_a_client_with_a_wrong_token_is_refused(sim: SimCluster, api: client.ApiClient) -> None:
    configuration = api.configuration
    wrong = client.Configuration()
    wrong.host, wrong.ssl_ca_cert = configuration.host, configuration.ssl_ca_cert
    wrong.api_key = {"authorization": "Bearer not-the-token"}
    with client.ApiClient(wrong) as other, pytest.raises(client.ApiException) as caught:
        client.CoreV1Api(other).list_node()
    assert caught.value.status == 401


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz", "/version"])
def test_health_and_version_answer_anonymously_as_public_info(sim: SimCluster, path: str) -> None:
    assert fetch(sim, path).status == 200


# -- Jupyter behind the service proxy ------------------------------------------------------------------


@pytest.fixture
def notebook(v1: client.CoreV1Api, namespace: str) -> str:
    """A notebook as the portal makes one: JUPYTER_TOKEN from a Secret, a Service in front of the pod."""
    v1.create_namespaced_secret(namespace, {"metadata": {"name": "nb-token"}, "stringData": {"token": NOTEBOOK_TOKEN}})
    token = {"name": "JUPYTER_TOKEN", "valueFrom": {"secretKeyRef": {"name": "nb-token", "key": "token"}}}
    container = {"name": "notebook", "image": "quay.io/jupyter/scipy-notebook:2025-01-01", "env": [token]}
    pod = {"metadata": {"name": "nb", "labels": {"app": "nb"}}, "spec": {"containers": [container]}}
    v1.create_namespaced_pod(namespace, pod)
    service = {"metadata": {"name": "nb"}, "spec": {"selector": {"app": "nb"}, "ports": [{"port": 8888}]}}
    v1.create_namespaced_service(namespace, service)
    wait_for_phase(v1, namespace, "nb", "Running")
    return f"/api/v1/namespaces/{namespace}/services/nb:8888/proxy"


def proxied(api: client.ApiClient, path: str, **query: str) -> tuple[int, bytes]:
    """Through the API server with the portal's own credentials (the kubeconfig's token)."""
    response = api.call_api(
        path,
        "GET",
        query_params=list(query.items()),
        _preload_content=False,
        auth_settings=["BearerToken"],
    )[0]
    return response.status, response.data


def test_jupyter_answers_its_api_with_the_right_token(api: client.ApiClient, notebook: str) -> None:
    status, body = proxied(api, f"{notebook}/api/status", token=NOTEBOOK_TOKEN)
    assert status == 200
    assert set(json.loads(body)) == {"started", "last_activity", "kernels", "connections"}


def test_jupyter_takes_the_token_from_its_authorization_header(sim: SimCluster, notebook: str) -> None:
    answer = fetch(sim, f"{notebook}/api/kernels", {"Authorization": f"token {NOTEBOOK_TOKEN}"})
    assert answer.status == 200
    assert isinstance(json.loads(answer.body), list)


@pytest.mark.parametrize("query", [{"token": "wrong"}, {}])
def test_jupyter_refuses_its_api_with_a_wrong_or_missing_token(
    api: client.ApiClient, notebook: str, query: dict[str, str]
) -> None:
    # The API server's bearer token is its own: it never reaches Jupyter.
    with pytest.raises(client.ApiException) as caught:
        proxied(api, f"{notebook}/api/status", **query)
    assert caught.value.status == 403
    assert json.loads(caught.value.body)["message"] == "Forbidden"


def test_jupyter_sends_a_browser_without_the_token_to_its_login_page(sim: SimCluster, notebook: str) -> None:
    answer = fetch(sim, f"{notebook}/lab")
    assert answer.status == 302
    assert answer.headers["Location"].startswith(f"{notebook}/login?next=")
    assert b"Simulated Jupyter" not in answer.body


def test_the_open_notebook_link_works_in_a_browser_without_api_credentials(sim: SimCluster, notebook: str) -> None:
    # The portal's link: the service proxy with ?token=, opened by a browser that has no bearer token.
    answer = fetch(sim, f"{notebook}/?token={NOTEBOOK_TOKEN}")
    assert answer.status == 200
    assert b"Simulated Jupyter for " in answer.body


def _plain_get(url: str) -> Answer:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
            return Answer(response.status, response.read(), dict(response.headers))
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.read(), dict(exc.headers))


def test_the_plain_door_serves_the_proxy_and_metrics_alone(sim: SimCluster, notebook: str) -> None:
    # What the demo's "Open notebook" links use: no certificate for the browser to accept.
    assert sim.plain_url.startswith("http://")
    answer = _plain_get(f"{sim.plain_url}{notebook}/?token={NOTEBOOK_TOKEN}")
    assert answer.status == 200
    assert b"Simulated Jupyter for " in answer.body
    assert _plain_get(f"{sim.plain_url}{notebook}/api/status").status == 403  # Jupyter still checks its token
    assert b"DCGM_FI_PROF_GR_ENGINE_ACTIVE" in _plain_get(f"{sim.plain_url}/metrics").body  # as dcgm-exporter
    for path in ("/api/v1/pods", "/api/v1/namespaces/default/secrets", "/version", "/_sim/state"):
        assert _plain_get(f"{sim.plain_url}{path}").status == 404, path
