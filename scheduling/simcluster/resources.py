"""The resource types the simulated API server serves, as discovery describes them."""

from __future__ import annotations

from dataclasses import dataclass

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
READ_VERBS = ("get", "list", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    # Events of both groups share one storage, as in the real API server.
    storage: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def store_key(self) -> str:
        return self.storage or self.plural

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    def qualified(self) -> str:
        """`pods` or `jobs.batch`: how error messages name the resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, ("ns",), subresources=("status",)),
    ResourceType("", "v1", "nodes", "Node", False, ("no",), subresources=("status",)),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        ("po",),
        categories=("all",),
        subresources=("status", "log", "eviction", "binding", "proxy"),
    ),
    ResourceType(
        "", "v1", "services", "Service", True, ("svc",), categories=("all",), subresources=("status", "proxy")
    ),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",), subresources=("status",)),
    ResourceType("", "v1", "events", "Event", True, ("ev",)),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    ResourceType("", "v1", "secrets", "Secret", True),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",)),
    ResourceType("batch", "v1", "jobs", "Job", True, categories=("all",), subresources=("status",)),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, ("ev",), storage="events"),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    # Dynamic Resource Allocation, GA in 1.34 (facts doc 4.1); resourceslices are written by the driver.
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, subresources=("status",)),
    ResourceType("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        True,
        ("pdb",),
        subresources=("status",),
    ),
)

BY_PATH: dict[tuple[str, str, str], ResourceType] = {(r.group, r.version, r.plural): r for r in RESOURCES}

# Group versions in the order discovery lists them; the preferred version is the only one.
GROUP_VERSIONS: tuple[tuple[str, str], ...] = tuple(dict.fromkeys((r.group, r.version) for r in RESOURCES))


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    return BY_PATH.get((group, version, plural))


def for_kind(api_version: str, kind: str) -> ResourceType | None:
    for r in RESOURCES:
        if r.api_version == api_version and r.kind == kind:
            return r
    return None


CORE = {r.plural: r for r in RESOURCES if r.group == ""}
PODS = CORE["pods"]
NODES = CORE["nodes"]
NAMESPACES = CORE["namespaces"]
SERVICES = CORE["services"]
PVCS = CORE["persistentvolumeclaims"]
EVENTS = CORE["events"]
JOBS = BY_PATH[("batch", "v1", "jobs")]
PRIORITY_CLASSES = BY_PATH[("scheduling.k8s.io", "v1", "priorityclasses")]
LEASES = BY_PATH[("coordination.k8s.io", "v1", "leases")]
