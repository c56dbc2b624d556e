"""Katib's stock hyperopt suggestion service, on an address of our choosing (benchmark baseline).

Katib's stock katib-config maps ``tpe`` and ``random`` to this image, not to its Optuna one.
Katib's ``cmd/suggestion/hyperopt/v1beta1/main.py`` always binds 0.0.0.0:6789; this serves the same
``HyperoptService`` (pkg/suggestion/v1beta1/hyperopt/service.py) from a Katib checkout on ``address``.
Run it with the Python environment of Katib's image (``hyperopt==0.2.5``, ``grpcio``, ``protobuf<5``:
cmd/suggestion/hyperopt/v1beta1/requirements.txt; NumPy below 2, which hyperopt 0.2.5 needs), see
docs/suggestion.md:

    python benchmarks/run_katib_hyperopt.py KATIB_CHECKOUT 127.0.0.1:50051
"""

from __future__ import annotations

import sys

from run_katib_optuna import katib_path, serve  # the same server around another of Katib's services


def main() -> int:
    katib_path(sys.argv[1])
    from pkg.suggestion.v1beta1.hyperopt.service import HyperoptService  # type: ignore[import-not-found]

    return serve(sys.argv[2], HyperoptService())


if __name__ == "__main__":
    sys.exit(main())
