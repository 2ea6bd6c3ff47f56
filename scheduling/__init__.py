"""How the cluster fulfils requests: quotas, placement engine, Kubernetes boundary, control loops.

Also the simulated cluster (``simcluster``) that the demo and the tests run against.
"""
