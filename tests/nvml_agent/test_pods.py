"""Host PID -> pod: cgroup lines as containerd, CRI-O and Docker write them under cgroup v1 and v2 with
either kubelet cgroup driver, and pod names from the kubelet's ``/var/log/pods`` folders."""

from __future__ import annotations

import pytest

from scheduling.nvml_agent.pods import Pod, PodCgroup, pod_cgroup, pods_from_log_dirs, pods_of

UID = "7c1e2f3a-5b6d-4e8f-9a0b-1c2d3e4f5a6b"
SYSTEMD_UID = UID.replace("-", "_")
CID = "3f2b9a8c" * 8

V1_CGROUPFS_DOCKER = f"""12:pids:/kubepods/burstable/pod{UID}/{CID}
11:memory:/kubepods/burstable/pod{UID}/{CID}
10:devices:/kubepods/burstable/pod{UID}/{CID}
4:cpu,cpuacct:/kubepods/burstable/pod{UID}/{CID}
1:name=systemd:/kubepods/burstable/pod{UID}/{CID}
"""
V1_SYSTEMD_CONTAINERD = "\n".join(
    f"{n}:{c}:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{SYSTEMD_UID}.slice/"
    f"cri-containerd-{CID}.scope"
    for n, c in [(13, "misc"), (9, "memory"), (5, "cpu,cpuacct"), (1, "name=systemd")]
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(V1_CGROUPFS_DOCKER, PodCgroup(UID, CID), id="v1-cgroupfs-docker"),
        pytest.param(V1_SYSTEMD_CONTAINERD, PodCgroup(UID, CID), id="v1-systemd-containerd"),
        pytest.param(
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice/"
            f"cri-containerd-{CID}.scope\n",
            PodCgroup(UID, CID),
            id="v2-systemd-containerd",
        ),
        pytest.param(
            f"0::/kubepods.slice/kubepods-pod{SYSTEMD_UID}.slice/crio-{CID}.scope\n",
            PodCgroup(UID, CID),
            id="v2-systemd-crio-guaranteed",
        ),
        pytest.param(
            f"0::/../../kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice/crio-{CID}.scope\n",
            PodCgroup(UID, CID),
            id="v2-seen-from-another-cgroup-namespace",
        ),
        pytest.param(
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice/"
            f"docker-{CID}.scope\n",
            PodCgroup(UID, CID),
            id="v2-systemd-docker",
        ),
        pytest.param(
            f"0::/kubepods/pod{UID}/{CID}\n",
            PodCgroup(UID, CID),
            id="v2-cgroupfs-guaranteed",
        ),
        pytest.param(
            f"0::/kubepods/besteffort/pod{UID}/crio-{CID}\n",
            PodCgroup(UID, CID),
            id="v2-cgroupfs-crio",
        ),
        pytest.param(
            f"0::/system.slice/containerd.service/kubepods-burstable-pod{SYSTEMD_UID}.slice:cri-containerd:{CID}\n",
            PodCgroup(UID, CID),
            id="v2-containerd-systemd-colon-form",
        ),
        pytest.param(
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice/"
            f"crio-conmon-{CID}.scope\n",
            PodCgroup(UID, ""),
            id="crio-conmon-is-the-pod-not-a-container",
        ),
        pytest.param(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
            "6b1f1c2e9d3a4b5c8e7f6a5b4c3d2e1f.slice/cri-containerd-" + CID + ".scope\n",
            PodCgroup("6b1f1c2e9d3a4b5c8e7f6a5b4c3d2e1f", CID),
            id="static-pod-hash-uid",
        ),
        pytest.param("0::/system.slice/ollama.service\n", None, id="host-service"),
        pytest.param("0::/user.slice/user-1000.slice/session-3.scope\n", None, id="login-session"),
        pytest.param("0::/kubepods.slice/kubepods-burstable.slice\n", None, id="qos-slice-without-pod"),
        pytest.param("", None, id="empty"),
    ],
)
def test_pod_cgroup(text, expected):
    assert pod_cgroup(text) == expected


def test_pods_from_log_dirs(tmp_path):
    for folder in (
        f"team-a_nb-alice_{UID}/notebook",
        "team-b_train-bob_0f9e8d7c-6b5a-4f3e-8d2c-1b0a9f8e7d6c/trainer",
        "team-b_train-bob_0f9e8d7c-6b5a-4f3e-8d2c-1b0a9f8e7d6c/log-shipper",
        "team-c_empty_11111111-2222-3333-4444-555555555555",
        "not-a-pod-folder",
        "a_b_c_d",
    ):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "x_y_z").write_text("a file, not a pod folder")

    assert pods_from_log_dirs(tmp_path) == {
        UID: Pod("team-a", "nb-alice", UID, "notebook"),
        "0f9e8d7c-6b5a-4f3e-8d2c-1b0a9f8e7d6c": Pod("team-b", "train-bob", "0f9e8d7c-6b5a-4f3e-8d2c-1b0a9f8e7d6c", ""),
        "11111111-2222-3333-4444-555555555555": Pod("team-c", "empty", "11111111-2222-3333-4444-555555555555", ""),
    }
    assert pods_from_log_dirs(tmp_path / "missing") == {}


def test_pods_of_pids(tmp_path):
    proc, logs = tmp_path / "proc", tmp_path / "pods"
    for pid, text in {10: V1_CGROUPFS_DOCKER, 11: "0::/system.slice/sshd.service\n"}.items():
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(text)
    (proc / "12").mkdir()  # no cgroup file readable
    other = "0::/kubepods/pod99999999-8888-7777-6666-555555555555/" + CID
    (proc / "13").mkdir()
    (proc / "13" / "cgroup").write_text(other)  # a pod with no log folder (already removed)
    (logs / f"team-a_nb-alice_{UID}" / "notebook").mkdir(parents=True)

    assert pods_of({10, 11, 12, 13, 14}, proc, logs) == {10: Pod("team-a", "nb-alice", UID, "notebook")}
