"""A workspace row's own invariants, checked by ``Workspace.clean`` (the admin's forms call it) and by the
request serializer through the same ``kind_problems``."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.models import Workspace


def problems(workspace: Workspace) -> dict[str, list[str]]:
    try:
        workspace.clean()
    except ValidationError as exc:
        return exc.message_dict
    return {}


def test_a_well_formed_notebook_and_job_are_clean(org: Org) -> None:
    h100 = install_offerings()["h100-80gb-hbm3"]
    notebook = make_workspace(org, h100, priority=Workspace.Priority.INTERACTIVE)
    job = make_workspace(org, h100, name="job", kind="job", workers=2, command=["python", "train.py"])
    assert problems(notebook) == {}
    assert problems(job) == {}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"workers": 2}, "workers"),
        ({"command": ["python", "x.py"]}, "command"),
        ({"priority": Workspace.Priority.HIGH}, "priority"),
        ({"kind": "job", "command": []}, "command"),
        ({"gpu_count": 0}, "gpu_count"),
    ],
)
def test_a_notebook_or_job_that_breaks_its_kind_is_refused(org: Org, fields: dict[str, Any], field: str) -> None:
    h100 = install_offerings()["h100-80gb-hbm3"]
    workspace = make_workspace(org, h100, **({"priority": Workspace.Priority.INTERACTIVE} | fields))
    assert list(problems(workspace)) == [field]


def test_a_cpu_workspace_has_no_gpus(org: Org) -> None:
    cpu = install_offerings()["cpu"]
    ok = make_workspace(org, cpu, count=0, priority=Workspace.Priority.INTERACTIVE)
    bad = make_workspace(org, cpu, name="bad", count=1, priority=Workspace.Priority.INTERACTIVE)
    assert problems(ok) == {}
    assert list(problems(bad)) == ["gpu_count"]
