"""The arm's cluster as the portal sees it: the simulated cluster's ``v1.Node`` objects for the node file,
the offerings the portal's discovery proposes on them, the placement inventory and the quota config."""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from scheduling.benchmarks.lab.model import LabModel
from scheduling.discovery import OfferingProposal, propose_offerings
from scheduling.engine import gpus as catalogue
from scheduling.engine.policies import make_policy
from scheduling.engine.policies.router import Router
from scheduling.engine.quota import QuotaConfig, TeamQuota, to_units, validate
from scheduling.inventory import Capacity
from scheduling.node_gpus import capacity_by_model, read_node
from scheduling.simcluster.node_objects import build_cluster_nodes, build_node_object
from scheduling.simcluster.node_render import render_node
from scheduling.simcluster.nodes import ClusterSpec, load_cluster_file

CREATED = "2027-01-01T00:00:00Z"


def _whole_gpus_only(cluster: ClusterSpec) -> ClusterSpec:
    """The same nodes with MIG off and no time-slicing (the device plugin's unshared default)."""
    nodes = tuple(
        replace(n, mig_config="all-disabled" if n.mig_config else None, plugin_config=None) for n in cluster.nodes
    )
    return replace(cluster, nodes=nodes, default_plugin_config=None, plugin_configs={})


def whole_gpus_file(path: Path, folder: Path) -> Path:
    """The node file with MIG off and no time-slicing (what :func:`_whole_gpus_only` does to the parsed
    cluster), written into ``folder`` for a cluster process of its own."""
    data = yaml.safe_load(path.read_text())
    data.pop("devicePlugin", None)
    for node in data.get("nodes") or []:
        node.pop("pluginConfig", None)
        if node.get("migConfig"):
            node["migConfig"] = "all-disabled"
    out = folder / f"{path.stem}-whole-gpus.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def node_objects(path: Path, *, whole_gpus_only: bool = False) -> list[dict[str, Any]]:
    cluster = load_cluster_file(path)
    return build_cluster_nodes(_whole_gpus_only(cluster) if whole_gpus_only else cluster, created=CREATED)


def render_nodes(
    cluster: ClusterSpec, mig_configs: Mapping[str, str], cordoned: Set[str] = frozenset()
) -> list[dict[str, Any]]:
    """The cluster's nodes with the MIG configs in ``mig_configs`` applied (by node name; the others keep
    the file's) and the nodes in ``cordoned`` cordoned: what the API server serves once the MIG manager has
    applied them (``node_render.render_node``, as ``build_cluster_nodes`` renders the file's)."""
    out = []
    for spec in cluster.nodes:
        config = mig_configs.get(spec.name, spec.mig_config)
        rendered = render_node(spec, cluster, mig_config=config, plugin_config=spec.plugin_config)
        out.append(build_node_object(spec, rendered, created=CREATED, unschedulable=spec.name in cordoned))
    return out


def every_layout_offering(cluster: ClusterSpec) -> dict[str, OfferingProposal]:
    """What discovery proposes on the cluster as it is, then on it with each named MIG config of the GPU
    Operator's default mig-parted config applied to every node of a MIG-capable model, by slug (the file's
    own first): the offerings a fleet whose layouts follow demand may come to serve."""
    found = {o.slug: o for o in propose_offerings(build_cluster_nodes(cluster, created=CREATED))}
    models = sorted({s.model.key for s in cluster.nodes if s.model is not None and s.model.mig_capable})
    for model in models:
        names = [s.name for s in cluster.nodes if s.model is not None and s.model.key == model]
        for config in catalogue.named_config_names(model):
            nodes = render_nodes(cluster, dict.fromkeys(names, config))
            for o in propose_offerings(nodes):
                found.setdefault(o.slug, o)
    return found


def cards(path: Path) -> list[str]:
    """Every GPU of the cluster, node by node: ``<node>/<index>``."""
    return [f"{n.name}/{i}" for n in load_cluster_file(path).nodes for i in range(n.gpu_count if n.gpu_model else 0)]


def _within_cluster(model: LabModel, by_model: Mapping[str, int]) -> None:
    """Guarantees are promises: the teams' may not add up to more GPUs of a model than the cluster has."""
    problems = []
    for m in {m for t in model.teams for m in (*t.guarantee, *t.borrow)}:
        total = sum(t.guarantee.get(m, 0.0) for t in model.teams)
        if m not in by_model:
            problems.append(f"the teams' quotas name {m}, which the cluster does not have")
        elif to_units(total) > by_model[m]:
            problems.append(f"the teams are guaranteed {total:g} {m}, the cluster has {by_model[m] / 1000:g}")
    if problems:
        raise ValueError("; ".join(problems))


@dataclass
class Fleet:
    offerings: Mapping[str, OfferingProposal]  # by slug
    quotas: QuotaConfig
    capacity: Capacity
    gpus: float  # GPUs of the cluster
    cluster: ClusterSpec  # as the arm renders it

    @classmethod
    def build(cls, model: LabModel, *, whole_gpus_only: bool, every_layout: bool = False) -> Fleet:
        """``every_layout``: offer what the MIG-capable nodes would serve under any named layout too."""
        cluster = load_cluster_file(model.cluster)
        if whole_gpus_only:
            cluster = _whole_gpus_only(cluster)
        nodes = build_cluster_nodes(cluster, created=CREATED)
        by_model = capacity_by_model(read_node(n) for n in nodes)
        quotas = QuotaConfig(
            {
                (t.name, m): TeamQuota(to_units(t.guarantee.get(m, 0.0)), to_units(t.borrow.get(m, 0.0)))
                for t in model.teams
                for m in by_model
            },
            {t.name: t.department for t in model.teams},
            caps={(d.name, m): to_units(v) for d in model.departments for m, v in d.cap.items()},
            capacity=by_model,
        )
        validate(quotas)  # QuotaError (a ValueError) says which rule the model breaks
        _within_cluster(model, by_model)
        capacity = Capacity.from_objects(nodes, [], router=Router(make_policy("ours", (), np.random.default_rng(0))))
        offerings = every_layout_offering(cluster) if every_layout else {o.slug: o for o in propose_offerings(nodes)}
        return cls(offerings, quotas, capacity, sum(by_model.values()) / 1000, cluster)

    def placement(self, mig_configs: Mapping[str, str], cordoned: Set[str]) -> Capacity:
        """A new, empty placement inventory for the nodes under ``mig_configs`` with ``cordoned`` out of
        placement; the same policy (router) as before, so that it keeps what it learnt."""
        return Capacity.from_objects(render_nodes(self.cluster, mig_configs, cordoned), [], router=self.capacity.router)

    def check(self, slugs: Mapping[str, tuple[str, ...]], arm: str) -> list[str]:
        """Problems with the arm's offering lists: slugs discovery does not propose on this cluster."""
        known = ", ".join(sorted(self.offerings))
        return [
            f"arm {arm} {what}: no offering {s!r} on its cluster (there are: {known})"
            for what, names in slugs.items()
            for s in names
            if s not in self.offerings
        ]
