"""Create a katib-progress Experiment from Python with the Kubeflow SDK (kubeflow 0.5.0).

The SDK's one-call ``OptimizerClient().optimize(...)`` cannot set what katib-progress needs (the
``Push`` metrics collector, ``earlyStopping``, a ``successCondition``, algorithms other than
``random``/``grid``), so this builds the Experiment from the SDK's own pieces instead:

- the search space with ``kubeflow.optimizer.Search`` (Katib ``ParameterSpec`` objects);
- the trial's TrainJob with ``kubeflow.trainer.CustomTrainer``: the SDK turns ``train_fn`` into the
  trainer command exactly as ``TrainerClient().train()`` would;
- the Experiment with the Katib API models the SDK ships (``kubeflow_katib_api.models``);
- submission with ``kubeflow.katib.KatibClient.create_experiment``.

    python examples/cluster/sdk/create_experiment.py --dry-run   # print the Experiment YAML
    kubectl apply -f examples/cluster/namespace.yaml
    python examples/cluster/sdk/create_experiment.py             # create it (needs a kubeconfig)

Needs Kubeflow Trainer v2.3.0 with feature gate ``TrainJobStatus`` (alpha), Katib v0.19.0 and
katib-progress installed (docs/deploy.md). It creates the Experiment in namespace
katib-progress-examples (``-n`` for another; the namespace needs the label
``katib.kubeflow.org/metrics-collector-injection: enabled``, which examples/cluster/namespace.yaml
sets). Follow it with ``kubectl get trials -n katib-progress-examples -w``;
``OptimizerClient().get_job()`` refuses experiments whose algorithm it does not know (kp-*).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, cast

import yaml
from kubeflow.optimizer import Search
from kubeflow.trainer import CustomTrainer, Runtime, RuntimeKind, RuntimeTrainer, TrainerType
from kubeflow.trainer.backends.kubernetes.utils import get_trainer_cr_from_custom_trainer
from kubeflow.trainer.constants import constants as trainer_constants
from kubeflow_katib_api import models as katib
from kubeflow_trainer_api import models as trainer_api

_log = logging.getLogger("sdk-example")

#: Katib succeeds a trial only when the TrainJob is Complete AND the katib-progress collector has
#: written its final metrics (docs/experiments.md, "successCondition").
SUCCESS_CONDITION = (
    r'..#(metadata.annotations.katib-progress\.kubeflow\.org/final-metrics=="written")#'
    r'|0.status.conditions.#(type=="Complete")#|#(status=="True")#'
)
FAILURE_CONDITION = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
#: Image of the stock torch-distributed ClusterTrainingRuntime of Trainer v2.x (used offline only).
DEFAULT_TORCH_IMAGE = "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"


def train_fn(lr: str, momentum: str, hidden: str, epochs: str = "20") -> None:
    """Runs inside each trial. Self-contained: the SDK ships this function's source, not the file.

    Katib substitutes the hyperparameters as strings, hence the conversions.
    """
    import math
    import os
    import time

    import torch
    from kubeflow.trainer import update_trainjob_status
    from torch import nn

    torch.manual_seed(0)
    x = torch.randn(4096, 20)
    y = ((x @ torch.randn(20, 1)).squeeze(1) + 0.5 * torch.randn(4096) > 0).long()
    x_train, y_train, x_val, y_val = x[:3276], y[:3276], x[3276:], y[3276:]
    model = nn.Sequential(nn.Linear(20, int(hidden)), nn.ReLU(), nn.Linear(int(hidden), 2))
    opt = torch.optim.SGD(model.parameters(), lr=float(lr), momentum=float(momentum))
    loss_fn = nn.CrossEntropyLoss()
    total = int(epochs) * math.ceil(3276 / 64)
    started, step = time.monotonic(), 0

    def metrics(loss: torch.Tensor) -> dict[str, float | int | str]:
        with torch.no_grad():
            logits = model(x_val)
            return {
                "loss": float(loss),
                "val_loss": float(loss_fn(logits, y_val)),
                "val_accuracy": float((logits.argmax(1) == y_val).float().mean()),
            }

    for _ in range(int(epochs)):
        perm = torch.randperm(3276)
        for i in range(0, 3276, 64):
            idx = perm[i : i + 64]
            loss = loss_fn(model(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 20 == 0 and step < total:
                eta = (time.monotonic() - started) / step * (total - step)
                update_trainjob_status(int(100 * step / total), int(eta), metrics(loss))
    final = metrics(loss)
    # The SDK drops updates within 5 s of the previous one: retry so the final snapshot lands.
    for _ in range(4):
        if not os.environ.get("KUBEFLOW_TRAINER_SERVER_URL") or update_trainjob_status(100, 0, final):
            break
        time.sleep(5.5)


def offline_runtime(name: str = "torch-distributed", image: str = DEFAULT_TORCH_IMAGE) -> Runtime:
    """The SDK's view of the stock torch runtime, built without a cluster.

    With a cluster, ``TrainerClient().get_runtime(name)`` returns the real one.
    """
    trainer = RuntimeTrainer(trainer_type=TrainerType.CUSTOM_TRAINER, framework="torch", image=image)
    trainer.set_command(trainer_constants.TORCH_COMMAND)
    return Runtime(name=name, trainer=trainer, kind=RuntimeKind.CLUSTER_TRAINING_RUNTIME)


def build_experiment(
    name: str = "sdk-custom-loop",
    *,
    runtime: Runtime | None = None,
    algorithm: str = "kp-tpe",
    max_trials: int = 12,
    parallel_trials: int = 3,
) -> dict[str, Any]:
    """The Experiment as a dict (what ``kubectl`` would get), built from the SDK's classes only."""
    runtime = runtime or offline_runtime()
    search_space = {
        "lr": Search.loguniform(0.001, 0.3),
        "momentum": Search.uniform(0.5, 0.99),
        "hidden": Search.choice([32, 64, 128, 256]),
    }
    parameters = []
    trial_parameters = []
    for param_name, spec in search_space.items():
        parameters.append(spec.model_copy(update={"name": param_name}))
        trial_parameters.append(katib.V1beta1TrialParameterSpec(name=param_name, reference=param_name))
    trainer = CustomTrainer(
        func=train_fn,
        func_args={p: f"${{trialParameters.{p}}}" for p in search_space},
        packages_to_install=["kubeflow==0.5.0"],
        resources_per_node={"cpu": 2, "memory": "2Gi"},
    )
    trainjob_spec = trainer_api.TrainerV1alpha1TrainJobSpec(
        runtimeRef=trainer_api.TrainerV1alpha1RuntimeRef(name=runtime.name, kind=runtime.kind.value),
        trainer=get_trainer_cr_from_custom_trainer(runtime, trainer),
    )
    experiment = katib.V1beta1Experiment(
        apiVersion="kubeflow.org/v1beta1",
        kind="Experiment",
        metadata=katib.IoK8sApimachineryPkgApisMetaV1ObjectMeta(name=name),
        spec=katib.V1beta1ExperimentSpec(
            objective=katib.V1beta1ObjectiveSpec(
                type="minimize",
                objectiveMetricName="val_loss",
                additionalMetricNames=["val_accuracy", "loss"],
            ),
            algorithm=katib.V1beta1AlgorithmSpec(
                algorithmName=algorithm,
                algorithmSettings=[katib.V1beta1AlgorithmSetting(name="n_startup_trials", value="4")],
            ),
            earlyStopping=katib.V1beta1EarlyStoppingSpec(
                algorithmName="katib-progress",
                algorithmSettings=[
                    katib.V1beta1EarlyStoppingSetting(name="policy", value="default"),
                    katib.V1beta1EarlyStoppingSetting(name="warmup_progress", value="20"),
                    katib.V1beta1EarlyStoppingSetting(name="min_trials", value="3"),
                ],
            ),
            metricsCollectorSpec=katib.V1beta1MetricsCollectorSpec(
                collector=katib.V1beta1CollectorSpec(kind="Push")
            ),
            parameters=parameters,
            maxTrialCount=max_trials,
            parallelTrialCount=parallel_trials,
            maxFailedTrialCount=3,
            trialTemplate=katib.V1beta1TrialTemplate(
                primaryContainerName=trainer_constants.NODE,
                retain=False,
                successCondition=SUCCESS_CONDITION,
                failureCondition=FAILURE_CONDITION,
                trialParameters=trial_parameters,
                trialSpec={
                    "apiVersion": trainer_constants.API_VERSION,
                    "kind": trainer_constants.TRAINJOB_KIND,
                    "spec": trainjob_spec.to_dict(),
                },
            ),
        ),
    )
    return experiment.to_dict()


def submit(experiment: dict[str, Any], namespace: str) -> str:
    """Create the Experiment with the Katib client (kubeconfig or in-cluster credentials)."""
    from kubeflow.katib import KatibClient

    # create_experiment takes the SDK model or, as here, the plain dict kubectl would send.
    KatibClient(namespace=namespace).create_experiment(cast(Any, experiment), namespace=namespace)
    return str(experiment["metadata"]["name"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "-n",
        "--namespace",
        default="katib-progress-examples",
        help="namespace, labelled katib.kubeflow.org/metrics-collector-injection=enabled "
        "(default katib-progress-examples: examples/cluster/namespace.yaml)",
    )
    parser.add_argument("--name", default="sdk-custom-loop")
    parser.add_argument("--algorithm", default="kp-tpe")
    parser.add_argument("--dry-run", action="store_true", help="print the Experiment YAML, create nothing")
    parser.add_argument(
        "--runtime-from-cluster",
        action="store_true",
        help="read the torch-distributed runtime with TrainerClient instead of the offline copy",
    )
    args = parser.parse_args(argv)
    runtime = None
    if args.runtime_from_cluster:
        from kubeflow.trainer import TrainerClient

        runtime = TrainerClient().get_runtime("torch-distributed")
    experiment = build_experiment(args.name, runtime=runtime, algorithm=args.algorithm)
    if args.dry_run:
        sys.stdout.write(yaml.safe_dump(experiment, sort_keys=False))
        return 0
    _log.info("created Experiment %s/%s", args.namespace, submit(experiment, args.namespace))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
