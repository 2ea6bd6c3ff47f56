"""Names and labels: always valid for Kubernetes, readable when they can be, never colliding."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.kube import names
from tests.kube import make_spec

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice", "alice"),
        ("my-notebook", "my-notebook"),
        ("a1", "a1"),
        ("user@email.com", "user-email-com---0925f997"),
        ("Alice", "alice---3bc51062"),
        ("alice-", "alice---e2c101bb"),
        ("-alice", "alice---69940822"),
        ("a--b", "a-b---90827a2e"),
        ("under_score", "under-score---d8071166"),
        ("", "e3b0c442"),
        ("@@@", "2ec847d8"),
        ("x" * 63, "x" * 63),
        ("x" * 64, "x" * 52 + "---" + "7ce10097"),
    ],
)
def test_safe_slug(text, expected):
    assert names.safe_slug(text) == expected


def test_safe_slug_respects_max_len():
    assert names.safe_slug("a" * 30, 20) == "a" * 9 + "---3a54fc0c"
    assert names.safe_slug("a" * 20, 20) == "a" * 20


def test_safe_slug_refuses_a_max_len_without_room_for_the_hash():
    with pytest.raises(ValueError, match="no room"):
        names.safe_slug("abc", 11)


@given(st.text(max_size=120), st.integers(min_value=12, max_value=63))
def test_safe_slug_is_always_a_dns_label(text, max_len):
    slug = names.safe_slug(text, max_len)
    assert DNS_LABEL.match(slug)
    assert len(slug) <= max_len


@given(st.text(max_size=80), st.text(max_size=80))
def test_safe_slug_does_not_collide(a, b):
    if a != b:
        assert names.safe_slug(a) != names.safe_slug(b)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice", "alice"),
        ("alice.smith", "alice.smith"),
        ("Alice_Smith-2", "Alice_Smith-2"),
        ("", ""),
        ("alice@example.com", "alice-example.com---ff8d9819"),
        ("a+b", "a-b---300273da"),
        ("a-b", "a-b"),
        ("_alice", "alice---e8ec4c3c"),
        ("x" * 64, "x" * 52 + "---7ce10097"),
    ],
)
def test_label_value(text, expected):
    assert names.label_value(text) == expected


@given(st.text(max_size=120))
def test_label_value_is_always_valid(text):
    value = names.label_value(text)
    assert LABEL_VALUE.match(value)
    assert len(value) <= 63


@pytest.mark.parametrize(
    ("team_slug", "expected"),
    [
        ("alpha", "team-alpha"),
        ("ml-research", "team-ml-research"),
        ("ML_Research", "team-ml-research---d9a7003b"),
        ("t" * 80, "team-" + "t" * 47 + "---35be239b"),
    ],
)
def test_namespace_for(team_slug, expected):
    assert names.namespace_for(team_slug) == expected
    assert len(expected) <= 63


@pytest.mark.parametrize(
    ("workspace_id", "name", "expected"),
    [
        (42, "my-notebook", "ws-42-my-notebook"),
        (42, "My Notebook", "ws-42-my-notebook"),
        (7, "llama.finetune_v2", "ws-7-llama-finetune-v2"),
        (7, "__", "ws-7"),
        (123, "n" * 200, "ws-123-" + "n" * 45),
        (10**9, "a-" * 40, "ws-1000000000-" + ("a-" * 19).rstrip("-")),
    ],
)
def test_workspace_base_name(workspace_id, name, expected):
    """The id makes the name unique, so the rest is only cleaned and cut: no hash needed."""
    assert names.workspace_base_name(workspace_id, name) == expected
    assert len(expected) <= names.BASE_NAME_MAX


@given(st.integers(min_value=1, max_value=10**12), st.text(max_size=200))
def test_workspace_base_name_leaves_room_for_job_pod_hostnames(workspace_id, name):
    base = names.workspace_base_name(workspace_id, name)
    assert DNS_LABEL.match(base)
    assert base[0].isalpha()  # a valid Service name (DNS-1035)
    assert len(f"{base}-9999") <= 63  # Indexed Job pod hostname <job>-<index>


def test_common_labels():
    spec = make_spec(workspace_id=42, name="My Notebook", team_slug="alpha", owner="alice@example.com")
    assert names.common_labels(spec) == {
        "app.kubernetes.io/name": "gpu-workspace",
        "app.kubernetes.io/instance": "ws-42-my-notebook",
        "app.kubernetes.io/component": "notebook",
        "app.kubernetes.io/managed-by": "gpu-portal",
        "app.kubernetes.io/part-of": "gpu-portal",
        "gpuportal.io/workspace-id": "42",
        "gpuportal.io/team": "alpha",
        "gpuportal.io/owner": "alice-example.com---ff8d9819",
    }


def test_common_labels_of_a_job_name_the_training_component():
    assert names.common_labels(make_spec(kind="job"))["app.kubernetes.io/component"] == "training"


def test_selector_labels_are_a_subset_of_the_common_labels():
    spec = make_spec()
    selector = names.selector_labels(spec)
    assert selector == {"app.kubernetes.io/name": "gpu-workspace", "app.kubernetes.io/instance": "ws-42-nb"}
    assert selector.items() <= names.common_labels(spec).items()


def test_home_pvc_name_depends_on_the_id_only():
    assert names.home_pvc_name(make_spec(workspace_id=42, name="a")) == "ws-42-home"
    assert names.home_pvc_name(make_spec(workspace_id=42, name="b")) == "ws-42-home"
