"""The classifier (pure): which timeline events are notifications, and what they say."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from workspaces.notifications.kinds import DEFAULT_EMAIL_KINDS, Kind, classify, valid_kinds
from workspaces.notifications.messages import compose, webhook_payload


@dataclass
class Event:
    from_state: str
    to_state: str
    details: Any = field(default_factory=dict)


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (Event("provisioning", "running"), Kind.STARTED),
        (Event("admitted", "running"), Kind.STARTED),
        (Event("running", "running"), None),  # a note on a running workspace
        (Event("running", "reclaimed"), Kind.RECLAIMED),
        (Event("running", "preempted"), Kind.PREEMPTED),
        (Event("provisioning", "failed"), Kind.FAILED),
        (Event("queued", "failed"), Kind.FAILED),
        (Event("running", "running", {"event": "idle_warning", "reclaim_at": "..."}), Kind.IDLE_WARNING),
        (Event("running", "running", {"event": "preemption_notice", "at": "..."}), Kind.PREEMPTION_NOTICE),
        (Event("running", "running", {"event": "possibly_stuck"}), Kind.POSSIBLY_STUCK),
        (Event("running", "running", {"event": "runtime_warning"}), Kind.RUNTIME_WARNING),
        (Event("running", "running", {"event": "something_else"}), None),
        (Event("running", "running", {"event": ["idle_warning"]}), None),  # not a name
        (Event("running", "running", "not a dict"), None),
        (Event("running", "stopping"), None),
        (Event("stopping", "stopped"), None),
        (Event("running", "expired"), None),
        (Event("queued", "admitted"), None),
        (Event("", "queued"), None),
        (Event("running", "succeeded"), None),
    ],
)
def test_it_classifies_events(event: Event, kind: Kind | None) -> None:
    assert classify(event) == kind


def test_email_is_on_by_default_for_all_but_started_and_operations_warnings() -> None:
    assert set(DEFAULT_EMAIL_KINDS) == set(Kind.values) - {Kind.STARTED, Kind.OPS_WARNING}


@pytest.mark.parametrize(
    ("value", "ok"),
    [([], True), (["failed", "started"], True), (["nope"], False), ("failed", False), ([1], False), (None, False)],
)
def test_it_validates_kind_lists(value: Any, ok: bool) -> None:
    assert valid_kinds(value) is ok


def test_a_message_has_a_headline_the_reason_and_a_link() -> None:
    message = compose(
        Kind.IDLE_WARNING,
        workspace_name="seg-tests",
        reason="Idle warning. GPU below 5 % for 60 min.",
        link="https://gpu.example.org/workspaces/7/",
        settings_link="https://gpu.example.org/notifications/settings/",
    )
    assert message.subject == "[GPU portal] seg-tests: Idle warning"
    assert message.text.startswith("seg-tests is idle and will be reclaimed")
    assert "GPU below 5 % for 60 min." in message.text
    assert "https://gpu.example.org/workspaces/7/" in message.body
    assert "https://gpu.example.org/notifications/settings/" in message.body
    assert webhook_payload(message, "https://gpu.example.org/workspaces/7/") == {
        "text": f"{message.text} https://gpu.example.org/workspaces/7/"
    }


def test_a_long_reason_is_cut_to_the_column() -> None:
    message = compose(Kind.FAILED, workspace_name="x", reason="y" * 2000, link="l", settings_link="s")
    assert len(message.text) == 600
