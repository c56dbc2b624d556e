from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from katib_progress.suggestion.server import SuggestionServer, create_server


@pytest.fixture
def start_server() -> Iterator[Callable[..., SuggestionServer]]:
    """Start suggestion servers on loopback port 0; every one is stopped at teardown."""
    started: list[SuggestionServer] = []

    def start(storage: str | None = None) -> SuggestionServer:
        server = create_server(["127.0.0.1:0"], storage=storage)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop(0)
