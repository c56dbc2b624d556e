"""The suggestion service's implementation of the pruning contract (``katib_progress.core.pruning``).

The application layer hands :data:`BACKEND` to the collector, which then validates Experiments'
pruning specs, builds in-process engines (the watchdog) and connects to pruning services with it,
without importing this package itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from katib_progress.core.pruning import PruningSpec
from katib_progress.suggestion.pruning.client import PruningClient
from katib_progress.suggestion.pruning.config import PruningConfig

if TYPE_CHECKING:
    from katib_progress.suggestion.pruning.engine import PruningEngine


class SuggestionPruningBackend:
    """``PruningBackend`` backed by :class:`PruningEngine` and :class:`PruningClient`."""

    def validate(self, spec: PruningSpec) -> None:
        PruningConfig.from_spec(spec)

    def engine(self, spec: PruningSpec) -> PruningEngine:
        # Optuna, numpy and scipy load here, not with the module: the collector validates specs and
        # connects through this backend without them (its image has none); only its opt-in
        # --watchdog builds engines, and the CLI asks for the `suggestion` extra then.
        from katib_progress.suggestion.pruning.engine import PruningEngine

        return PruningEngine(PruningConfig.from_spec(spec))

    def connect(self, address: str, timeout: float) -> PruningClient:
        return PruningClient(address, timeout=timeout)


BACKEND = SuggestionPruningBackend()
