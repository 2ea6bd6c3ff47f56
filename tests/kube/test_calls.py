"""The call wrapper: how failures are classified, and idempotence against the simulated cluster."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse

from scheduling.kube import calls, manifests, names
from scheduling.kube.calls import Kube, KubeError, PermanentKubeError, TransientKubeError, classify
from tests.kube import make_spec

# The client itself calls the deprecated urllib3 getheaders() when it builds an ApiException.
pytestmark = pytest.mark.filterwarnings("ignore:HTTPResponse.getheaders:DeprecationWarning")

INVALID_MESSAGE = (
    'Pod "ws-42-nb" is invalid: spec.containers[0].resources.limits[nvidia.com/gpu]: '
    'Invalid value: "500m": must be an integer'
)


def api_exception(status: int, reason: str, body: Any) -> ApiException:
    """An ApiException as the client raises it, from a real urllib3 response."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body.encode()
    response = urllib3.HTTPResponse(
        body=data, status=status, reason=reason, headers={"Content-Type": "application/json"}
    )
    return ApiException(http_resp=RESTResponse(response))


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


# -- classify ---------------------------------------------------------------------------------------


def test_422_is_permanent_and_carries_the_api_message():
    exc = api_exception(422, "Unprocessable Entity", status_body(422, "Invalid", INVALID_MESSAGE))
    error = classify(exc)
    assert isinstance(error, PermanentKubeError)
    assert error.status == 422
    assert error.reason == "Invalid"
    assert error.message == INVALID_MESSAGE
    assert str(error) == INVALID_MESSAGE


@pytest.mark.parametrize(
    ("status", "reason"),
    [(400, "BadRequest"), (403, "Forbidden"), (404, "NotFound"), (401, "Unauthorized")],
)
def test_client_errors_are_permanent(status, reason):
    error = classify(api_exception(status, reason, status_body(status, reason, f"{reason} says no")))
    assert isinstance(error, PermanentKubeError)
    assert (error.status, error.reason, error.message) == (status, reason, f"{reason} says no")


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (500, "InternalError"),
        (502, "BadGateway"),
        (503, "ServiceUnavailable"),
        (504, "Timeout"),
        (429, "TooManyRequests"),
        (409, "Conflict"),
        (408, "Timeout"),
    ],
)
def test_server_trouble_throttling_and_conflicts_are_transient(status, reason):
    error = classify(api_exception(status, reason, status_body(status, reason, "try again")))
    assert isinstance(error, TransientKubeError)
    assert error.status == status
    assert error.message == "try again"


def test_a_body_that_is_not_json_becomes_the_message():
    error = classify(api_exception(502, "Bad Gateway", "<html>upstream down</html>"))
    assert isinstance(error, TransientKubeError)
    assert error.message == "<html>upstream down</html>"


def test_an_empty_body_falls_back_to_the_http_reason():
    error = classify(api_exception(503, "Service Unavailable", ""))
    assert isinstance(error, TransientKubeError)
    assert error.message == "Service Unavailable"


def test_a_request_the_client_could_not_send_is_transient():
    """The client raises status 0 for TLS failures before anything reached the server."""
    assert isinstance(classify(ApiException(status=0, reason="SSLError")), TransientKubeError)


@pytest.mark.parametrize(
    "exc",
    [
        urllib3.exceptions.MaxRetryError(None, "/api/v1/pods", reason="refused"),  # type: ignore[arg-type]
        urllib3.exceptions.ProtocolError("Connection aborted."),
        urllib3.exceptions.ReadTimeoutError(None, "/api/v1/pods", "Read timed out."),  # type: ignore[arg-type]
        urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection"),  # type: ignore[arg-type]
        TimeoutError("timed out"),
        ConnectionResetError("reset by peer"),
        ConnectionRefusedError("refused"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_network_failures_are_transient(exc):
    error = classify(exc)
    assert isinstance(error, TransientKubeError)
    assert error.status is None
    assert type(exc).__name__ in error.message


def test_other_exceptions_are_neither_transient_nor_permanent():
    error = classify(KeyError("spec"))
    assert type(error) is KubeError


def test_classify_leaves_our_own_errors_alone():
    error = PermanentKubeError("no", status=422, reason="Invalid")
    assert classify(error) is error


def test_unknown_kinds_are_refused():
    kube = Kube(client.ApiClient(client.Configuration()), timeout=1)
    with pytest.raises(ValueError, match="unsupported kind 'Deployment'"):
        kube.get("Deployment", "team-alpha", "x")


# -- against a listener that never answers, or nothing at all ------------------------------------------


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers: the request timeout must end the call."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def kube_at(host: str, timeout: float) -> Kube:
    configuration = client.Configuration(host=host)
    configuration.retries = False  # measure our timeout, not urllib3's retries of it
    return Kube(client.ApiClient(configuration), timeout=timeout)


def test_a_hung_api_server_becomes_a_transient_error_within_the_timeout(silent_server):
    kube = kube_at(silent_server, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(TransientKubeError, match="ReadTimeoutError"):
        kube.get("Pod", "team-alpha", "ws-42-nb")
    assert time.monotonic() - started < 3


def test_create_against_a_hung_api_server_also_times_out(silent_server):
    kube = kube_at(silent_server, timeout=0.3)
    with pytest.raises(TransientKubeError):
        kube.ensure(manifests.make_namespace("alpha"))


def test_an_unreachable_api_server_is_transient():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        kube = kube_at(f"http://127.0.0.1:{port}", timeout=1)
        with pytest.raises(TransientKubeError) as info:
            kube.list("Pod", "team-alpha", "app.kubernetes.io/name=gpu-workspace")
    assert isinstance(info.value.__cause__, urllib3.exceptions.HTTPError | OSError)


def test_objects_without_a_namespace_are_refused_before_any_call():
    pod = manifests.make_notebook_pod(make_spec(), base_url="/")
    pod.metadata.namespace = None
    with pytest.raises(ValueError, match="no namespace"):
        Kube(client.ApiClient(client.Configuration()), timeout=1).ensure(pod)


def test_the_module_documents_that_it_never_retries():
    assert "no retries in here" in (calls.__doc__ or "").lower()


# -- against the simulated cluster ------------------------------------------------------------------

SPEED = 10.0  # simulated seconds per real second


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    testing = pytest.importorskip(
        "scheduling.simcluster.testing", reason="the simulated cluster (scheduling/simcluster/testing.py) is absent"
    )
    with testing.running_simcluster(seed=11, speed=SPEED, tmp_dir=tmp_path_factory.mktemp("kube-calls")) as cluster:
        yield cluster


def client_for(sim: Any) -> client.ApiClient:
    """Configured from the kubeconfig, with urllib3's own retries off: by default urllib3 retries a GET
    three more times on read timeouts and on 429/503 with Retry-After, which would multiply the
    timeout and hide throttling from the caller (the Celery task owns retries)."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(sim.kubeconfig_path), client_configuration=configuration)
    configuration.retries = False
    return client.ApiClient(configuration)


@pytest.fixture(scope="module")
def kube(sim: Any) -> Iterator[Kube]:
    api_client = client_for(sim)
    yield Kube(api_client, timeout=5.0)
    api_client.close()


@pytest.fixture
def clean_faults(sim: Any) -> Iterator[Any]:
    yield sim
    sim.clear_faults()


_ids = iter(range(1000, 10**6))


def fresh_spec(**changes: Any) -> Any:
    """A workspace in a team of its own, so tests never see each other's objects."""
    workspace_id = next(_ids)
    return make_spec(workspace_id=workspace_id, team_slug=f"t{workspace_id}", **changes)


def wait_for(probe: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := probe()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {probe}")
        time.sleep(0.05)
    return result


def provision(kube: Kube, spec: Any, **kwargs: Any) -> list[dict[str, Any]]:
    kube.ensure(manifests.make_namespace(spec.team_slug))
    return [kube.ensure(obj) for obj in manifests.objects_for(spec, **kwargs)]


def instance_selector(spec: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in names.selector_labels(spec).items())


def test_ensure_twice_makes_exactly_one_of_everything(kube):
    spec = fresh_spec()
    first = provision(kube, spec, token="t0ken", base_url="/")
    again = provision(kube, spec, token="t0ken", base_url="/")
    assert [o["metadata"]["uid"] for o in again] == [o["metadata"]["uid"] for o in first]
    assert [o["kind"] for o in first] == ["PersistentVolumeClaim", "Secret", "Pod", "Service"]
    namespace = names.namespace_for(spec.team_slug)
    selector = instance_selector(spec)
    for kind in ("Pod", "Service", "PersistentVolumeClaim", "Secret"):
        found = kube.list(kind, namespace, selector)
        assert len(found) == 1, kind
        assert found[0]["kind"] == kind
    assert len(kube.list("Namespace", None, f"gpuportal.io/team={spec.team_slug}")) == 1


def test_ensure_answers_the_stored_object(kube):
    spec = fresh_spec()
    kube.ensure(manifests.make_namespace(spec.team_slug))
    pod = kube.ensure(manifests.make_notebook_pod(spec, base_url="/"))
    assert pod["metadata"]["namespace"] == names.namespace_for(spec.team_slug)
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert kube.get("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"]) is not None


def test_delete_twice_answers_false_the_second_time(kube):
    spec = fresh_spec()
    provision(kube, spec, token="t", base_url="/")
    namespace = names.namespace_for(spec.team_slug)
    for kind, name in [
        ("Service", names.base_name(spec)),
        ("Pod", names.base_name(spec)),
        ("Secret", names.token_secret_name(spec)),
        ("PersistentVolumeClaim", names.home_pvc_name(spec)),
    ]:
        assert kube.delete(kind, namespace, name) is True
        wait_for(lambda kind=kind, name=name: kube.get(kind, namespace, name) is None)
        assert kube.delete(kind, namespace, name) is False


def test_get_of_a_missing_object_is_none(kube):
    assert kube.get("Pod", "default", "no-such-pod") is None
    assert kube.get("Namespace", None, "no-such-namespace") is None


def test_a_fractional_gpu_is_refused_with_the_api_message(kube):
    spec = fresh_spec()
    kube.ensure(manifests.make_namespace(spec.team_slug))
    pod = as_body(manifests.make_notebook_pod(spec, base_url="/"))
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "0.5"
    with pytest.raises(PermanentKubeError) as info:
        kube.ensure(pod)
    assert info.value.status == 422
    assert info.value.reason == "Invalid"
    assert info.value.message.startswith(f'Pod "{names.base_name(spec)}" is invalid: ')
    assert "nvidia.com/gpu" in info.value.message
    assert kube.list("Pod", names.namespace_for(spec.team_slug), instance_selector(spec)) == []


def as_body(obj: Any) -> dict[str, Any]:
    body: dict[str, Any] = client.ApiClient().sanitize_for_serialization(obj)
    return body


def test_an_injected_503_is_transient(kube, clean_faults):
    spec = fresh_spec()
    kube.ensure(manifests.make_namespace(spec.team_slug))
    clean_faults.inject_fault(verb="create", resource="pods", status=503)
    with pytest.raises(TransientKubeError) as info:
        kube.ensure(manifests.make_notebook_pod(spec, base_url="/"))
    assert info.value.status == 503
    # The fault was used up: the retry the Celery task would make succeeds, once.
    kube.ensure(manifests.make_notebook_pod(spec, base_url="/"))
    assert len(kube.list("Pod", names.namespace_for(spec.team_slug), instance_selector(spec))) == 1


@pytest.mark.parametrize(
    ("status", "error"), [(429, TransientKubeError), (500, TransientKubeError), (403, PermanentKubeError)]
)
def test_injected_faults_on_reads_are_classified(kube, clean_faults, status, error):
    clean_faults.inject_fault(verb="list", resource="pods", status=status, message="injected")
    with pytest.raises(error) as info:
        kube.list("Pod", None, "app.kubernetes.io/name=gpu-workspace")
    assert (info.value.status, info.value.message) == (status, "injected")


def test_a_slow_api_server_times_out(sim, clean_faults):
    slow = Kube(client_for(sim), timeout=0.3)
    clean_faults.inject_fault(verb="get", resource="pods", delay_s=3.0)
    started = time.monotonic()
    with pytest.raises(TransientKubeError, match="ReadTimeoutError"):
        slow.get("Pod", "default", "anything")
    assert time.monotonic() - started < 2.5


def test_a_training_job_runs_and_is_deleted_with_its_pods(kube):
    spec = fresh_spec(kind="job", workers=2, simulated_duration_seconds=3600)
    objects = provision(kube, spec)
    provision(kube, spec)
    assert [o["kind"] for o in objects] == ["Service", "Job"]
    namespace = names.namespace_for(spec.team_slug)
    selector = instance_selector(spec)
    assert len(kube.list("Job", namespace, selector)) == 1
    pods = wait_for(lambda: len(kube.list("Pod", namespace, selector)) == 2 and kube.list("Pod", namespace, selector))
    assert {p["spec"]["hostname"] for p in pods} == {f"{names.base_name(spec)}-0", f"{names.base_name(spec)}-1"}
    assert kube.delete("Job", namespace, names.base_name(spec)) is True
    wait_for(lambda: kube.list("Pod", namespace, selector) == [])
    assert kube.delete("Job", namespace, names.base_name(spec)) is False


def test_pod_log_and_events_of_a_running_notebook(kube):
    spec = fresh_spec(workload_profile="idle-notebook")
    provision(kube, spec, token="t", base_url="/")
    namespace, name = names.namespace_for(spec.team_slug), names.base_name(spec)
    wait_for(lambda: (kube.get("Pod", namespace, name) or {}).get("status", {}).get("phase") == "Running")
    assert isinstance(kube.pod_log(namespace, name, tail_lines=5), str)
    events = kube.events_for(namespace, "Pod", name)
    assert events, "the scheduler and kubelet report on the pod"
    assert all(e["involvedObject"]["name"] == name for e in events)
    assert "Scheduled" in {e["reason"] for e in events}


def test_patch_node_labels(kube):
    node = kube.list("Node", None, "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3")[0]["metadata"]["name"]
    patched = kube.patch_node_labels(node, {"gpuportal.io/test": "yes"})
    assert patched["metadata"]["labels"]["gpuportal.io/test"] == "yes"
    removed = kube.patch_node_labels(node, {"gpuportal.io/test": None})
    assert "gpuportal.io/test" not in removed["metadata"]["labels"]


def test_ensure_does_not_take_a_terminating_object_for_a_created_one(kube, sim):
    spec = fresh_spec()
    kube.ensure(manifests.make_namespace(spec.team_slug))
    namespace, name = names.namespace_for(spec.team_slug), names.token_secret_name(spec)
    secret = as_body(manifests.make_token_secret(spec, "t"))
    secret["metadata"]["finalizers"] = ["gpuportal.io/hold"]  # keeps it terminating until removed
    kube.ensure(secret)
    assert kube.delete("Secret", namespace, name) is True
    with pytest.raises(TransientKubeError, match="still being deleted"):
        kube.ensure(secret)
    core = client.CoreV1Api(client_for(sim))
    core.patch_namespaced_secret(name, namespace, {"metadata": {"finalizers": None}})
    wait_for(lambda: kube.get("Secret", namespace, name) is None)
    del secret["metadata"]["finalizers"]
    assert kube.ensure(secret)["metadata"]["name"] == name
