"""The Katib edge of the collector: the DB manager client sink."""

from collector.katib.dbmanager import DBManagerSettings, DBManagerSink

__all__ = ["DBManagerSettings", "DBManagerSink"]
