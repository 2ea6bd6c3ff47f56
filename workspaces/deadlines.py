"""When a workspace's runtime ends. The portal enforces it (see ``actions.do_extend``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from workspaces.models import Workspace


def workspace_deadline(workspace: Workspace) -> datetime | None:
    if workspace.started_at is None:
        return None
    return workspace.started_at + timedelta(seconds=workspace.max_runtime_seconds)
