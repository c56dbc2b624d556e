"""Names every component must agree on (Katib labels, our registered algorithm names)."""

from __future__ import annotations

#: Label Katib puts on every Trial, naming its Experiment.
EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"
#: katib-config registers our suggestion algorithms with this prefix (``kp-tpe``...) so the stock
#: images keep the plain names.
ALGORITHM_PREFIX = "kp-"
#: Our policy's name under an Experiment's ``spec.earlyStopping.algorithmName``.
EARLY_STOPPING_ALGORITHM = "katib-progress"
