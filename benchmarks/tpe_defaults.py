"""How the ``tpe`` defaults were chosen: plain Optuna TPE samplers on the suggestion benchmark's
functions, in process (no gRPC), 60 sequential trials per seed.

Run it with the project's Optuna for candidate settings, and with Optuna 3.3 (Katib's image pins
``optuna==3.3.0``, cmd/suggestion/optuna/v1beta1/requirements.txt) for Katib's reference, which
configures ``TPESampler(constant_liar=True, seed=random_state)`` (pkg/suggestion/v1beta1/optuna/
service.py ``OptimizerConfiguration``). Each line printed is JSON: the Optuna version, the label,
the settings and, per function, the noise-free value of the best observed trial per seed (the
same scoring and noise streams as ``bench_suggestion.py --part quality``).

    python benchmarks/tpe_defaults.py '{"katib": {"multivariate": false}}' --seeds 10 --first-seed 0
    python benchmarks/tpe_defaults.py '{"mv-ei64": {"multivariate": true, "n_ei_candidates": 64}}'
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import optuna

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.suggestion_functions import FUNCTIONS, KINDS, LEVELS


def best_found(config: dict[str, Any], function: str, seed: int, trials: int) -> float:
    sampler = optuna.samplers.TPESampler(seed=seed, constant_liar=True, **config)
    study = optuna.create_study(sampler=sampler)
    func = FUNCTIONS[function]
    best = (math.inf, math.inf)
    for i in range(trials):
        trial = study.ask()
        params = {
            "x": trial.suggest_float("x", 0, 1),
            "scale": trial.suggest_float("scale", 1e-5, 1, log=True),
            "k": trial.suggest_int("k", 1, 16),
            "kind": trial.suggest_categorical("kind", list(KINDS)),
            "level": trial.suggest_categorical("level", list(LEVELS)),
        }
        observed = func(params, np.random.default_rng([seed, i]))
        study.tell(trial, observed)
        if observed < best[0]:
            best = (observed, func(params, None))
    return best[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", help='JSON: {"label": {TPESampler keyword: value}}')
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=60)
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    for label, config in json.loads(args.configs).items():
        best = {f: [best_found(config, f, s, args.trials) for s in seeds] for f in FUNCTIONS}
        line = {
            "optuna": optuna.__version__,
            "label": label,
            "config": config,
            "seeds": list(seeds),
            "best": best,
        }
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
