"""Every benchmark, apart from the product: placement on the Alibaba trace (``placement``, ``mig``,
``replay``), the queue in simulated time (``queue``, ``queue_sim``), the live scheduling cycle (``cycle``),
the full stack (``stack``, ``stack_queue``, ``workspaces``) and the simulated cluster (``simcluster``).
Run with ``python -m scheduling.benchmarks.<name>`` or the ``bench_*`` management commands."""
