"""Embedded observation store: Katib's DBManager gRPC API over an SQLite file."""

from katib_progress.collector.store.server import SERVICE_NAME, StoreServer, start_store_server

__all__ = ["SERVICE_NAME", "StoreServer", "start_store_server"]
