"""Local sweep: run a Katib Experiment (TrainJob trials) on one machine, live, with pruning.

Public API (import from the modules; this package imports nothing so the CLI starts fast)::

    from katib_progress.local.experiment import load_experiment
    from katib_progress.local.runner import SweepOptions, run_sweep
    from katib_progress.local.summary import read_summary

    result = run_sweep(load_experiment("experiment.yaml"), SweepOptions(workdir=Path("w")))

``katib_progress.local.endpoint.StatusEndpoint`` is the local TrainJob status endpoint. See docs/local.md.
"""
