"""katib-progress: live TrainJob progress -> observation logs -> pruning decisions.

Import layout (one distribution, three import packages):

- ``katib_progress``: the Katib-free core (``katib_progress.core``: trainer status -> progress
  points -> curves), the CLI, the local sweep and the reports.
- ``collector``: the controller that watches TrainJobs and writes observation logs (Katib DB
  manager, embedded SQLite store).
- ``suggestion``: the Optuna-backed suggestion service and the live pruning policies.

Katib's protobuf types appear only in ``*/katib/`` edge modules.
"""

__version__ = "0.1.0"
