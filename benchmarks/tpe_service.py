"""Our suggestion service's TPE in process: the service's own code (servicer, study, sampler reuse
and per-ask seeding) without gRPC, driven exactly like ``bench_suggestion.py --part quality`` (one
suggestion per call, 60 trials, the same experiment names, seeds, noise and scoring), with extra
``TPESampler`` keywords per label. Prints one JSON line per label like ``tpe_defaults.py`` (which
runs plain Optuna samplers and Katib's Optuna 3.3); ``tpe_compare.py`` tabulates them.

    .venv/bin/python benchmarks/tpe_service.py multivariate-tpe \\
        '{"prior1.0": {"prior_weight": 1.0}, "prior1.5": {"prior_weight": 1.5}}' --seeds 30 --first-seed 10

A label's keywords replace the service's own for every TPESampler it builds (``{}``: the service's
defaults); ``"settings"`` in a label gives algorithm settings as the Experiment would.
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

from benchmarks.suggestion_functions import FUNCTIONS, typed
from benchmarks.suggestion_services import space
from katib_progress.suggestion._registry import StudyRegistry
from katib_progress.suggestion.katib.servicer import SuggestionServicer
from tests.suggestion.katib_fake import Cond, FakeKatib, FakeTrial, experiment

_TPESampler = optuna.samplers.TPESampler
_EXTRA: dict[str, Any] = {}


def _tpe_with_extra(**kwargs: Any) -> optuna.samplers.TPESampler:
    return _TPESampler(**{**kwargs, **_EXTRA})


class _InProcessKatib(FakeKatib):
    """Katib's requests, handed to the servicer directly (no channel)."""

    def connect(self, address: str) -> None:
        pass


def best_found(algorithm: str, function: str, seed: int, trials: int, settings: dict[str, str]) -> float:
    exp = experiment(
        name=f"q-{algorithm}-{function}-{seed}",
        algorithm=algorithm,
        settings={"random_state": str(seed), **settings},
        params=space(algorithm),
        max_trials=trials,
        parallel=3,
    )
    katib = _InProcessKatib("in-process", exp)
    servicer = SuggestionServicer(StudyRegistry())
    func = FUNCTIONS[function]
    best = (math.inf, math.inf)
    for i in range(trials):
        reply = servicer.GetSuggestions(katib.request(1), None)
        (assignment,) = reply.parameter_assignments
        trial = FakeTrial(assignment.trial_name, tuple((a.name, a.value) for a in assignment.assignments))
        katib.trials.append(trial)
        params = typed(dict(trial.assignments))
        observed = func(params, np.random.default_rng([seed, i]))
        trial.condition = Cond.SUCCEEDED
        trial.objective = exp.spec.objective
        trial.metrics[katib.metric] = repr(observed)
        if observed < best[0]:
            best = (observed, func(params, None))
    return best[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("algorithm", help="tpe or multivariate-tpe")
    parser.add_argument("configs", help='JSON: {"label": {TPESampler keyword: value, "settings": {...}}}')
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--first-seed", type=int, default=10)
    parser.add_argument("--trials", type=int, default=60)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    optuna.samplers.TPESampler = _tpe_with_extra  # type: ignore[misc,assignment]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    for label, config in json.loads(args.configs).items():
        settings = config.pop("settings", {})
        _EXTRA.clear()
        _EXTRA.update(config)
        best = {
            f: [best_found(args.algorithm, f, s, args.trials, settings) for s in seeds] for f in FUNCTIONS
        }
        line = {
            "optuna": optuna.__version__,
            "label": label,
            "algorithm": args.algorithm,
            "config": config,
            "settings": settings,
            "seeds": list(seeds),
            "best": best,
        }
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
