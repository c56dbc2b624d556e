"""Load harness of ``benchmarks/bench_watch.py``: realistic Katib/Trainer objects (``objects``), a lean
Kubernetes API stand-in that streams TrainJob status updates (``apiserver``, run as its own process)
and the measuring side (``measure``: /proc readers and the SQLite row poller)."""
