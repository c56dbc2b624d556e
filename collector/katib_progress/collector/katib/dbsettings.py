"""Settings of the DB manager client (``DBManagerSink``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from katib_progress.collector.backoff import BackoffSettings


class DBManagerSettings(BaseModel):
    """Tuning of the DB manager client."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rpc_timeout_s: float = Field(default=5.0, gt=0, description="deadline of each RPC")
    max_batch_rows: int = Field(default=1000, ge=1, description="rows per ReportObservationLog at most")
    max_buffered_rows: int = Field(
        default=100_000, ge=1, description="rows held while the DB manager is down"
    )
    backoff: BackoffSettings = Field(
        default=BackoffSettings(initial_s=0.1, max_s=5.0), description="between attempts of one batch"
    )
    close_timeout_s: float = Field(
        default=10.0, ge=0, description="close() waits this long to deliver the rest"
    )
    senders: int = Field(default=8, ge=1, le=256, description="RPCs in flight at most (one per trial)")
    lock_wait_s: float = Field(
        default=60.0,
        ge=0,
        description="after an ambiguous failure, wait this long before reading the batch back (a stock "
        "DB manager may still commit it until its lock wait ends; MySQL's innodb_lock_wait_timeout "
        "defaults to 50 s); not applied to a store that advertises idempotent writes",
    )

    @classmethod
    def from_cli(cls, args: Any) -> DBManagerSettings:
        """Settings from ``collector run`` arguments (``--max-buffered-rows``, ``--rpc-timeout``,
        ``--db-manager-lock-wait``)."""
        values = {
            "max_buffered_rows": getattr(args, "max_buffered_rows", None),
            "rpc_timeout_s": getattr(args, "rpc_timeout", None),
            "lock_wait_s": getattr(args, "db_manager_lock_wait", None),
        }
        return cls(**{k: v for k, v in values.items() if v is not None})
