"""The kubelet state machine: bind, start, finish, restart, deadlines, node trouble, logs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from scheduling.simcluster.kubelet import (
    DURATION_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    PodUpdate,
    advance_pod,
    evict_pod,
    fail_pod,
    noexecute_eviction_due,
    normalized_image,
    pod_events,
    status_on_bind,
    taint_eviction_condition,
)
from scheduling.simcluster.pod_logs import pod_log_lines
from scheduling.simcluster.scheduler import schedule_pod
from tests.simcluster.test_scheduler import NOW, assert_valid, make_node, make_pod

DELAY = timedelta(seconds=5)
NODE = make_node("gpu-a")


def bound(pod: dict[str, Any], node: dict[str, Any] = NODE) -> dict[str, Any]:
    """pod as it looks right after binding to node at NOW."""
    out = dict(pod, spec=pod["spec"] | {"nodeName": node["metadata"]["name"]})
    out["status"] = status_on_bind(out, node["metadata"]["name"], NOW, host_ip="192.168.0.10")
    return out


def job_pod(seconds: int, exit_code: int = 0, restart: str = "Never", **spec: Any) -> dict[str, Any]:
    annotations = {DURATION_ANNOTATION: str(seconds), EXIT_CODE_ANNOTATION: str(exit_code)}
    return bound(make_pod("train", gpus=1, annotations=annotations, spec={"restartPolicy": restart} | spec))


def run(pod: dict[str, Any], until: timedelta, node: dict[str, Any] = NODE) -> dict[str, Any]:
    """Advance pod to NOW + until in one call and apply the update."""
    update = advance_pod(pod, node, NOW + until, start_delay=DELAY)
    return pod if update is None else pod | {"status": update.status}


def container(pod: dict[str, Any]) -> dict[str, Any]:
    status: dict[str, Any] = pod["status"]["containerStatuses"][0]
    return status


def conditions(pod: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {c["type"]: (c["status"], c.get("reason")) for c in pod["status"]["conditions"]}


def test_status_on_bind() -> None:
    pod = bound(make_pod("nb", gpus=1))
    assert_valid(pod)
    status = pod["status"]
    assert (status["phase"], status["hostIP"], status["startTime"]) == (
        "Pending",
        "192.168.0.10",
        "2026-05-01T09:00:00Z",
    )
    assert status["qosClass"] == "Guaranteed"
    assert container(pod)["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert conditions(pod) == {
        "PodReadyToStartContainers": ("False", None),
        "Initialized": ("True", None),
        "Ready": ("False", "ContainersNotReady"),
        "ContainersReady": ("False", "ContainersNotReady"),
        "PodScheduled": ("True", None),
    }
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["message"] == "containers with unready status: [main]"


def test_pending_until_the_start_delay_then_running() -> None:
    pod = bound(make_pod("nb", gpus=1, image="quay.io/jupyter/pytorch-notebook:cuda12-2024-05-01"))
    assert advance_pod(pod, NODE, NOW + timedelta(seconds=4), start_delay=DELAY) is None

    update = advance_pod(pod, NODE, NOW + timedelta(seconds=60), start_delay=DELAY)

    assert update is not None
    running = pod | {"status": update.status}
    assert_valid(running)
    assert running["status"]["phase"] == "Running"
    assert running["status"]["podIP"].startswith("10.244.1.")
    assert set(conditions(running).values()) == {("True", None)}
    state = container(running)
    assert state["state"] == {"running": {"startedAt": "2026-05-01T09:00:05Z"}}
    assert (state["ready"], state["started"], state["restartCount"]) == (True, True, 0)
    assert state["image"] == "quay.io/jupyter/pytorch-notebook:cuda12-2024-05-01"
    assert state["imageID"].startswith("quay.io/jupyter/pytorch-notebook@sha256:")
    assert state["containerID"].startswith("containerd://")
    assert [e.reason for e in update.events] == ["Pulled", "Created", "Started"]
    # A notebook has no simulated duration: it runs on.
    assert advance_pod(running, NODE, NOW + timedelta(days=3), start_delay=DELAY) is None


def test_a_job_pod_succeeds_after_its_duration() -> None:
    done = run(job_pod(60), timedelta(minutes=5))
    assert_valid(done)
    assert done["status"]["phase"] == "Succeeded"
    assert container(done)["state"]["terminated"] == {
        "exitCode": 0,
        "reason": "Completed",
        "startedAt": "2026-05-01T09:00:05Z",
        "finishedAt": "2026-05-01T09:01:05Z",
        "containerID": container(done)["containerID"],
    }
    assert conditions(done)["Ready"] == ("False", "PodCompleted")
    assert conditions(done)["Initialized"] == ("True", "PodCompleted")
    assert advance_pod(done, NODE, NOW + timedelta(hours=1), start_delay=DELAY) is None


def test_a_failing_job_pod_with_restart_never_fails() -> None:
    failed = run(job_pod(60, exit_code=3), timedelta(minutes=5))
    assert failed["status"]["phase"] == "Failed"
    assert container(failed)["state"]["terminated"]["reason"] == "Error"
    assert container(failed)["state"]["terminated"]["exitCode"] == 3
    assert conditions(failed)["ContainersReady"] == ("False", "PodFailed")


def test_on_failure_restarts_with_crash_loop_back_off() -> None:
    pod = job_pod(60, exit_code=1, restart="OnFailure")
    # 0:05 start, 1:05 exit -> restarted at once; 2:05 exit -> 10 s back-off; 2:15 restart.
    first = run(pod, timedelta(seconds=90))
    assert (first["status"]["phase"], container(first)["restartCount"]) == ("Running", 1)
    assert container(first)["lastState"]["terminated"]["exitCode"] == 1

    waiting = run(pod, timedelta(seconds=130))
    state = container(waiting)
    assert state["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert state["state"]["waiting"]["message"] == (
        "back-off 10s restarting failed container=main pod=train_team-a(uid-train)"
    )
    assert conditions(waiting)["Ready"] == ("False", "ContainersNotReady")
    assert_valid(waiting)

    again = run(pod, timedelta(seconds=136))
    assert container(again)["restartCount"] == 2
    assert container(again)["state"]["running"]["startedAt"] == "2026-05-01T09:02:15Z"


def test_restart_always_restarts_even_after_success() -> None:
    pod = run(job_pod(60, restart="Always"), timedelta(seconds=90))
    assert (pod["status"]["phase"], container(pod)["restartCount"]) == ("Running", 1)


def test_catching_up_in_one_step_equals_ticking() -> None:
    pod = job_pod(45, exit_code=1, restart="OnFailure")
    ticked = pod
    for second in range(0, 601, 7):
        ticked = run(ticked, timedelta(seconds=second))
    assert run(pod, timedelta(seconds=600))["status"] == run(ticked, timedelta(seconds=600))["status"]


def test_active_deadline_fails_the_pod() -> None:
    pod = bound(make_pod("nb", gpus=1, spec={"activeDeadlineSeconds": 3600}))
    update = advance_pod(pod, NODE, NOW + timedelta(hours=2), start_delay=DELAY)
    assert update is not None
    status = update.status
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed",
        "DeadlineExceeded",
        "Pod was active on the node longer than the specified deadline",
    )
    assert container(pod | {"status": status})["state"]["terminated"]["exitCode"] == 137
    assert container(pod | {"status": status})["state"]["terminated"]["finishedAt"] == "2026-05-01T10:00:00Z"
    assert "DeadlineExceeded" in [e.reason for e in update.events]
    assert_valid(pod | {"status": status})


def test_a_job_that_ends_before_its_deadline_is_not_killed() -> None:
    pod = run(job_pod(60, activeDeadlineSeconds=3600), timedelta(hours=2))
    assert pod["status"]["phase"] == "Succeeded"


def test_node_not_ready_makes_the_pod_unready_until_it_recovers() -> None:
    running = run(bound(make_pod("nb", gpus=1)), timedelta(minutes=1))
    sick = make_node("gpu-a", ready="Unknown")

    update = advance_pod(running, sick, NOW + timedelta(minutes=2), start_delay=DELAY)

    assert update is not None
    assert [(e.reason, e.component) for e in update.events] == [("NodeNotReady", "node-controller")]
    unready = running | {"status": update.status}
    assert conditions(unready)["Ready"] == ("False", None)
    assert unready["status"]["phase"] == "Running"
    assert advance_pod(unready, sick, NOW + timedelta(minutes=3), start_delay=DELAY) is None
    assert conditions(run(unready, timedelta(minutes=4)))["Ready"] == ("True", None)


def test_pods_on_a_lost_node_are_evicted_after_their_toleration() -> None:
    running = run(bound(make_pod("nb", gpus=1)), timedelta(minutes=1))
    lost = make_node("gpu-a", ready="Unknown")  # Ready went Unknown at NOW
    assert not noexecute_eviction_due(running, lost, NOW + timedelta(seconds=299))
    assert noexecute_eviction_due(running, lost, NOW + timedelta(seconds=300))
    assert not noexecute_eviction_due(running, NODE, NOW + timedelta(days=1))
    condition = taint_eviction_condition(NOW)
    assert (condition["reason"], condition["message"]) == (
        "DeletionByTaintManager",
        "Taint manager: deleting due to NoExecute taint",
    )


def test_injected_failures() -> None:
    running = run(bound(make_pod("nb", gpus=1)), timedelta(minutes=1))
    status = fail_pod(running, NOW, "UnexpectedAdmissionError", "Allocate failed due to no healthy devices present")
    assert (status["phase"], status["reason"]) == ("Failed", "UnexpectedAdmissionError")
    assert_valid(running | {"status": status})

    evicted = evict_pod(running, NOW)
    assert (evicted["phase"], evicted["reason"]) == ("Failed", "Evicted")
    disruption = next(c for c in evicted["conditions"] if c["type"] == "DisruptionTarget")
    assert (disruption["status"], disruption["reason"]) == ("True", "TerminationByKubelet")
    assert_valid(running | {"status": evicted})


def test_normalized_image() -> None:
    assert normalized_image("busybox") == "docker.io/library/busybox:latest"
    assert normalized_image("jupyter/base-notebook:lab-4") == "docker.io/jupyter/base-notebook:lab-4"
    assert normalized_image("localhost:5000/nb") == "localhost:5000/nb:latest"


def test_pod_events_are_valid_events_about_containers() -> None:
    pod = bound(make_pod("nb", gpus=1))
    update = advance_pod(pod, NODE, NOW + timedelta(seconds=30), start_delay=DELAY)
    assert isinstance(update, PodUpdate)
    events = pod_events(pod, update, NOW + timedelta(seconds=30))
    for event in events:
        assert_valid(event)
    assert events[1]["involvedObject"]["fieldPath"] == "spec.containers{main}"
    assert events[1]["source"] == {"component": "kubelet", "host": "gpu-a"}
    assert events[1]["message"] == "Created container: main"
    assert len({e["metadata"]["name"] for e in events}) == len(events)


def test_notebook_logs() -> None:
    pod = run(bound(make_pod("nb", gpus=1, image="quay.io/jupyter/scipy-notebook:2024-05-01")), timedelta(seconds=10))
    lines = pod_log_lines(pod, NOW + timedelta(minutes=10))
    assert lines[0] == "[I 2026-05-01 09:00:05.400 ServerApp] jupyter_lsp | extension was successfully linked."
    assert any("Jupyter Server 2.14.2 is running at:" in line for line in lines)
    assert any("Kernel started:" in line for line in lines)
    assert lines == pod_log_lines(pod, NOW + timedelta(minutes=10))
    assert pod_log_lines(bound(make_pod("nb")), NOW) == []


def test_training_logs_follow_the_run() -> None:
    pod = run(job_pod(600), timedelta(minutes=2))
    lines = pod_log_lines(pod, NOW + timedelta(minutes=2))
    assert lines[0].endswith("INFO Using device cuda:0 (1 GPU(s) visible)")
    assert "epoch 1/2 step" in lines[-1]
    finished = run(job_pod(600), timedelta(hours=1))
    final = pod_log_lines(finished, NOW + timedelta(hours=1))
    assert final[-1].endswith("INFO Training complete; checkpoint saved to /outputs/model.pt")
    assert len(final) == 3 + 20 + 1


def test_scheduled_bound_and_started_pod_is_a_valid_object_end_to_end() -> None:
    nodes = [make_node("gpu-a"), make_node("gpu-b", gpus=0)]
    pod = make_pod("nb", gpus=2)
    decision = schedule_pod(pod, nodes, [])
    assert decision.node_name == "gpu-a"
    running = run(bound(pod, nodes[0]), timedelta(minutes=1), nodes[0])
    assert_valid(running)
    assert running["status"]["phase"] == "Running"
