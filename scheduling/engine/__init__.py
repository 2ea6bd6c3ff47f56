"""Scheduling engine: pure Python and numpy, no Django, no network.

Placement modules:

- ``shapes``: what a pod asks for (:class:`PodShape`) and where it goes (:class:`Placement`).
- ``state``: the cluster as numpy arrays, one row per node; copy to snapshot, apply/release to update.
- ``fragmentation``: FGD's fragmentation measure, kept incrementally per node (:class:`FragIndex`).
- ``workload``: typical request shapes learned online.
- ``policies``: first-fit, best-fit, FGD and the portal's own policy (``ours``) behind one interface.
- ``gpus`` (GPU catalogue and MIG facts), ``mig`` (slot tables), ``mig_placement``, ``timeslice``.
- ``trace``, ``simulate``, ``bench``, ``mig_bench``: the benchmark on the public Alibaba trace.
- ``whatif``: replay a pod list on a modified cluster.
"""
