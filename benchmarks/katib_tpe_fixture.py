"""Record what Katib's own service suggests for ``multivariate-tpe`` or ``tpe``: the fixtures of
tests/suggestion/test_katib_tpe.py.

Starts Katib's stock Optuna service (``--baseline-cmd``, as for ``bench_suggestion.py``; Katib's image
runs Optuna 3.3.0) and drives it over gRPC like Katib's controller, one trial at a time: ask one
suggestion, report it Succeeded with ``tests.suggestion.katib_fake.default_objective``, repeat. Prints
the experiment and Katib's replies as JSON.

    .venv/bin/python benchmarks/katib_tpe_fixture.py --baseline-cmd \\
        "/work/notes/katib33/bin/python benchmarks/run_katib_optuna.py /work/notes/katib-src {address}" \\
        > tests/suggestion/fixtures/katib_multivariate_tpe.json
    .venv/bin/python benchmarks/katib_tpe_fixture.py --algorithm tpe --baseline-cmd \\
        "$KATIB_VENV/bin/python benchmarks/run_katib_optuna.py $KATIB {address}" \\
        > tests/suggestion/fixtures/katib_tpe.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.suggestion_services import baseline_spec, log_dir, running
from tests.suggestion.katib_fake import FakeKatib, FakeTrial, experiment, param

#: One parameter of each Katib kind; ``n_startup_trials`` below the default so that most trials are
#: TPE's, ``n_ei_candidates`` left at Katib's default.
SETTINGS = {"random_state": "3", "n_startup_trials": "5"}
TRIALS = 25


def params() -> tuple[Any, ...]:
    return (
        param("lr", "double", lo="0.0001", hi="0.1", dist="logUniform"),
        param("dropout", "double", lo="0", hi="0.5"),
        param("layers", "int", lo="1", hi="8"),
        param("optimizer", "categorical", values=("sgd", "adam", "rmsprop")),
        param("momentum", "discrete", values=("0.1", "0.5", "0.9")),
    )


def drive(address: str, trials: int = TRIALS, algorithm: str = "multivariate-tpe") -> list[list[list[str]]]:
    """The sequential loop; each suggestion as [[param, value], ...]. Katib's service names no
    trials: they are named here as Katib's controller would (any unique name)."""
    katib = FakeKatib(address, experiment(algorithm=algorithm, settings=SETTINGS, params=params()))
    for i in range(trials):
        reply = katib.stub.GetSuggestions(katib.request(1), timeout=60)
        (pa,) = reply.parameter_assignments
        trial = FakeTrial(pa.trial_name or f"exp-{i:05d}", tuple((a.name, a.value) for a in pa.assignments))
        katib.trials.append(trial)
        katib.finish(trial)
    katib.close()
    return [[list(a) for a in t.assignments] for t in katib.trials]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-cmd", required=True, help="command starting Katib's service ({address})")
    parser.add_argument("--algorithm", default="multivariate-tpe", choices=("multivariate-tpe", "tpe"))
    args = parser.parse_args(argv)
    with log_dir() as logs, running(baseline_spec(args.baseline_cmd, None), logs) as address:
        replies = drive(address, algorithm=args.algorithm)
    rows = ",\n  ".join(json.dumps(r) for r in replies)
    head = "" if args.algorithm == "multivariate-tpe" else f'"algorithm": {json.dumps(args.algorithm)},\n '
    print(f'{{{head}"settings": {json.dumps(SETTINGS)},\n "trials": [\n  {rows}\n ]}}')
    return 0


if __name__ == "__main__":
    sys.exit(main())
