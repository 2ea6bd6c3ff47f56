"""Jupyter tokens, derived rather than stored.

The token is an HMAC of the workspace id and a random per-workspace salt under the portal's secret key:
the database holds no token (nothing to leak from a dump), the owner's page can always show it, and a
new salt revokes it.
"""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings

from workspaces.models import Workspace


def jupyter_token(workspace: Workspace) -> str:
    message = f"jupyter:{workspace.pk}:{workspace.token_salt}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()[:48]
