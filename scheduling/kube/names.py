"""Names and labels of the portal's Kubernetes objects, derived from the workspace, never typed by hand.

A name that had to be changed (bad characters, too long) gets ``---`` and a short hash of the original
text appended, so two different inputs never end up with the same name. Text that is already valid is
kept as is, which keeps ordinary names readable in ``kubectl get``.
"""

from __future__ import annotations

import hashlib
import re

from scheduling.kube.keys import MANAGED_BY, MANAGER, OWNER, TEAM, WORKSPACE_ID
from scheduling.kube.spec import WorkspaceSpec

DNS_LABEL_MAX = 63
# Job pods are named <job>-<index>-<5 random chars> and their hostname is <job>-<index>: a base name of
# at most 52 leaves room for "-" + a 4-digit index + "-" + 5 characters within 63.
BASE_NAME_MAX = 52

_HASH_LEN = 8
_SEPARATOR = "---"  # never produced by slugging, so a hashed name cannot equal an unchanged one
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_LEN]


def _with_hash(cleaned: str, original: str, max_len: int) -> str:
    keep = max_len - len(_SEPARATOR) - _HASH_LEN
    head = cleaned[:keep].rstrip("-_.")
    return f"{head}{_SEPARATOR}{_hash(original)}" if head else _hash(original)


def safe_slug(text: str, max_len: int = DNS_LABEL_MAX) -> str:
    """A DNS-1123 label (lowercase alphanumerics and ``-``) of at most ``max_len`` characters."""
    if max_len < len(_SEPARATOR) + _HASH_LEN + 1:
        raise ValueError(f"max_len {max_len} leaves no room for a hash suffix")
    if len(text) <= max_len and _DNS_LABEL.match(text) and "--" not in text:
        return text
    return _with_hash(_dns_clean(text), text, max_len)


def _dns_clean(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def label_value(text: str) -> str:
    """A valid label value: at most 63 characters, alphanumeric at both ends, ``-_.`` inside."""
    if text == "" or (len(text) <= DNS_LABEL_MAX and _LABEL_VALUE.match(text) and _SEPARATOR not in text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-_.")
    return _with_hash(cleaned, text, DNS_LABEL_MAX)


def namespace_for(team_slug: str) -> str:
    """One namespace per team."""
    prefix = "team-"
    return prefix + safe_slug(team_slug, DNS_LABEL_MAX - len(prefix))


def workspace_base_name(workspace_id: int, name: str) -> str:
    """``ws-<id>-<slug>``: the name of the pod, service or job of a workspace (at most 52 characters).

    The id alone makes it unique within the portal, so the name part is only cleaned and cut, with no
    hash: ``My Notebook`` gives ``ws-42-my-notebook``. The ``ws-`` prefix makes it a valid Service name
    too (DNS-1035: must start with a letter).
    """
    prefix = f"ws-{workspace_id}"
    tail = _dns_clean(name)[: BASE_NAME_MAX - len(prefix) - 1].rstrip("-")
    return f"{prefix}-{tail}" if tail else prefix


def base_name(spec: WorkspaceSpec) -> str:
    return workspace_base_name(spec.workspace_id, spec.name)


def home_pvc_name(spec: WorkspaceSpec) -> str:
    """Depends on the id only, so the volume is found again on resume whatever else changed."""
    return f"ws-{spec.workspace_id}-home"


def token_secret_name(spec: WorkspaceSpec) -> str:
    return f"{base_name(spec)}-token"


def component(spec: WorkspaceSpec) -> str:
    return "notebook" if spec.kind == "notebook" else "training"


def selector_labels(spec: WorkspaceSpec) -> dict[str, str]:
    """The labels that pick out the pods of one workspace (Service selectors)."""
    return {
        "app.kubernetes.io/name": "gpu-workspace",
        "app.kubernetes.io/instance": base_name(spec),
    }


def common_labels(spec: WorkspaceSpec) -> dict[str, str]:
    """Labels on every object of a workspace; the reconcile loop finds orphans by them."""
    return {
        **selector_labels(spec),
        "app.kubernetes.io/component": component(spec),
        MANAGED_BY: MANAGER,
        "app.kubernetes.io/part-of": MANAGER,
        WORKSPACE_ID: str(spec.workspace_id),
        TEAM: label_value(spec.team_slug),
        OWNER: label_value(spec.owner),
    }
