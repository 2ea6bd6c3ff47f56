"""Discovery documents (`/api`, `/apis`, group versions) and `/version`, built from the resource table."""

from __future__ import annotations

from typing import Any

from scheduling.simcluster.resources import GROUP_VERSIONS, RESOURCES, ResourceType

JSON = dict[str, Any]

SERVER_VERSION: JSON = {
    "major": "1",
    "minor": "34",
    "emulationMajor": "1",
    "emulationMinor": "34",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "33",
    "gitVersion": "v1.34.2",
    "gitCommit": "8cc511e399b929453cd98ae65b419c3cc227ec79",
    "gitTreeState": "clean",
    "buildDate": "2025-11-11T19:09:37Z",
    "goVersion": "go1.24.9",
    "compiler": "gc",
    "platform": "linux/amd64",
}

# Subresources beyond the main resource: (kind, group, version, verbs); empty group/version: the parent's.
_SUBRESOURCES: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "status": ("", "", "", ("get", "patch", "update")),
    "log": ("Pod", "", "", ("get",)),
    "eviction": ("Eviction", "policy", "v1", ("create",)),
    "binding": ("Binding", "", "", ("create",)),
    "proxy": ("{kind}ProxyOptions", "", "", ("create", "delete", "get", "patch", "update")),
}


def api_versions(server_address: str) -> JSON:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str) -> JSON:
    versions = [{"groupVersion": f"{g}/{v}", "version": v} for g, v in GROUP_VERSIONS if g == name]
    return {"name": name, "versions": versions, "preferredVersion": versions[0]}


def api_group_list() -> JSON:
    names = list(dict.fromkeys(g for g, _ in GROUP_VERSIONS if g))
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(n) for n in names]}


def api_group(name: str) -> JSON | None:
    if not any(g == name for g, _ in GROUP_VERSIONS if g):
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name)}


def _entries(r: ResourceType) -> list[JSON]:
    main: JSON = {
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": list(r.verbs),
    }
    if r.short_names:
        main["shortNames"] = list(r.short_names)
    if r.categories:
        main["categories"] = list(r.categories)
    out = [main]
    for sub in r.subresources:
        kind, group, version, verbs = _SUBRESOURCES[sub]
        entry: JSON = {
            "name": f"{r.plural}/{sub}",
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": kind.format(kind=r.kind) if kind else r.kind,
            "verbs": list(verbs),
        }
        if group:
            entry |= {"group": group, "version": version}
        out.append(entry)
    return out


def resource_list(group: str, version: str) -> JSON | None:
    if (group, version) not in GROUP_VERSIONS:
        return None
    entries = [e for r in RESOURCES if (r.group, r.version) == (group, version) for e in _entries(r)]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": entries,
    }
