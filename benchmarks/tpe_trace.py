"""Katib's ``multivariate-tpe`` (or ``tpe``, ``--algorithm tpe``) and ours, suggestion by suggestion,
in process: the benchmark's 60-trial sequential loops (``bench_suggestion.py --part quality``: same
space, seeds, noise), printing every suggestion as Katib's service would send it (one JSON line per
function and seed).

Run with Katib's Python environment (Optuna 3.3), it asks as Katib's service does
(pkg/suggestion/v1beta1/optuna/base_service.py: one ``TPESampler(multivariate=True,
constant_liar=True, seed=random_state)`` per experiment, without ``multivariate`` for ``tpe``,
``study.ask(fixed_distributions=...)`` per suggestion with the space ``_get_optuna_search_space``
builds, ``study.tell(number, value)``, values sent as ``str``); with ours, it drives our servicer
(as ``tpe_service.py``). The outputs are equal line for line when the suggestions are:

    $KATIB_VENV/bin/python benchmarks/tpe_trace.py --seeds 70 > katib.jsonl
    .venv/bin/python benchmarks/tpe_trace.py --seeds 70 > ours.jsonl
    cmp katib.jsonl ours.jsonl
    $KATIB_VENV/bin/python benchmarks/tpe_trace.py --algorithm tpe --seeds 70 > katib-tpe.jsonl
    .venv/bin/python benchmarks/tpe_trace.py --algorithm tpe --seeds 70 > ours-tpe.jsonl
    cmp katib-tpe.jsonl ours-tpe.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import optuna

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.suggestion_functions import FUNCTIONS, KINDS, LEVELS, typed


def katib(function: str, seed: int, trials: int, algorithm: str) -> list[dict[str, str]]:
    multivariate = {"multivariate": True} if algorithm == "multivariate-tpe" else {}
    sampler = optuna.samplers.TPESampler(seed=seed, constant_liar=True, **multivariate)
    study = optuna.create_study(sampler=sampler)
    space = {
        "x": optuna.distributions.FloatDistribution(0, 1),
        "scale": optuna.distributions.FloatDistribution(1e-5, 1, log=True),
        "k": optuna.distributions.IntDistribution(1, 16),
        "kind": optuna.distributions.CategoricalDistribution(list(KINDS)),
        "level": optuna.distributions.CategoricalDistribution(list(LEVELS)),
    }
    out = []
    for i in range(trials):
        trial = study.ask(fixed_distributions=space)
        out.append({k: str(v) for k, v in trial.params.items()})
        study.tell(trial.number, FUNCTIONS[function](typed(out[-1]), np.random.default_rng([seed, i])))
    return out


def ours(function: str, seed: int, trials: int, algorithm: str) -> list[dict[str, str]]:
    from benchmarks.suggestion_services import space
    from katib_progress.suggestion._registry import StudyRegistry
    from katib_progress.suggestion.katib.servicer import SuggestionServicer
    from tests.suggestion.katib_fake import Cond, FakeKatib, FakeTrial, experiment

    class InProcess(FakeKatib):
        def connect(self, address: str) -> None:
            pass

    exp = experiment(
        name=f"q-{algorithm}-{function}-{seed}",
        algorithm=algorithm,
        settings={"random_state": str(seed)},
        params=space(algorithm),
        max_trials=trials,
        parallel=3,
    )
    driver = InProcess("in-process", exp)
    servicer = SuggestionServicer(StudyRegistry())
    out = []
    for i in range(trials):
        (pa,) = servicer.GetSuggestions(driver.request(1), None).parameter_assignments
        trial = FakeTrial(pa.trial_name, tuple((a.name, a.value) for a in pa.assignments))
        driver.trials.append(trial)
        out.append(dict(trial.assignments))
        trial.condition = Cond.SUCCEEDED
        trial.objective = exp.spec.objective
        trial.metrics[driver.metric] = repr(
            FUNCTIONS[function](typed(out[-1]), np.random.default_rng([seed, i]))
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--algorithm", default="multivariate-tpe", choices=("multivariate-tpe", "tpe"))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    run: Any = katib if optuna.__version__.startswith("3.") else ours
    for function in FUNCTIONS:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            line = {
                "function": function,
                "seed": seed,
                "suggestions": run(function, seed, args.trials, args.algorithm),
            }
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
