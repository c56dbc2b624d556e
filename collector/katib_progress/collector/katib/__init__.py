"""The Katib edge of the collector: the DB manager client sink."""

from katib_progress.collector.katib.dbmanager import DBManagerSettings, DBManagerSink

__all__ = ["DBManagerSettings", "DBManagerSink"]
