"""Scheduling engine: pure Python and numpy, no Django, no network.

Placement modules:

- ``shapes``: what a pod asks for (:class:`PodShape`) and where it goes (:class:`Placement`).
- ``state``: the cluster as numpy arrays, one row per node; copy to snapshot, apply/release to update.
- ``fragmentation``: FGD's fragmentation measure, kept incrementally per node (:class:`FragIndex`).
- ``workload``: typical request shapes learned online.
- ``policies``: first-fit, best-fit, FGD and the portal's own policy (``ours``) behind one interface.
- ``gpus`` (GPU catalogue and MIG facts), ``mig`` (slot tables), ``mig_placement``, ``timeslice``.

Admission modules: ``quota`` (the quota model and its rules: ceiling, department cap), ``admission`` (the
decision), ``fairshare`` (decayed usage).

The trace benchmark and the what-if planner that use the engine live in ``scheduling.benchmarks`` and
``scheduling.planning``.
"""
