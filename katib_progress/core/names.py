"""Names every component must agree on (Katib labels, our registered algorithm names)."""

from __future__ import annotations

#: Label Katib puts on every Trial, naming its Experiment.
EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"
#: katib-config registers our suggestion algorithms with this prefix (``kp-tpe``...) so the stock
#: images keep the plain names.
ALGORITHM_PREFIX = "kp-"
#: Our policy's name under an Experiment's ``spec.earlyStopping.algorithmName``.
EARLY_STOPPING_ALGORITHM = "katib-progress"
#: Katib's early-stopping algorithm that our early-stopping service also serves, by Katib's rules.
MEDIANSTOP = "medianstop"
#: The ``runtime.earlyStoppings`` names katib-config registers for our early-stopping image (the
#: collector forwards progress to it for Experiments naming one of them).
EARLY_STOPPING_ALGORITHMS = (EARLY_STOPPING_ALGORITHM, ALGORITHM_PREFIX + MEDIANSTOP)
