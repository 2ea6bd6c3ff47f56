"""How the cluster fulfils requests. The rooms (docs/architecture.md says what each may import):

- ``engine/``: pure decisions (placement, admission, quota rules), no Django, no network;
- ``kube/``: the only code that talks to Kubernetes (client, calls, manifests, label keys);
- ``quota/``: quota rules read from the database, the cycle's snapshot, quota actions, fair-share usage;
- ``loops/``: the scheduling cycle, provisioning, reconcile, task names and beat's schedule;
- ``planning/``: what-if capacity planning; ``benchmarks/``: every benchmark;
- ``simcluster/``: the simulated GPU cluster the demo and the tests run against;
- ``services``: the one door the ``workspaces`` app uses; ``demand``: a workspace in the engine's and the
  cluster's terms; ``node_gpus``: a node's GPUs from its labels; ``inventory``: the live placement view.
"""
