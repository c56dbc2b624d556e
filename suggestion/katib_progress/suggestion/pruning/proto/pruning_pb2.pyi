from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Direction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DIRECTION_UNSPECIFIED: _ClassVar[Direction]
    MINIMIZE: _ClassVar[Direction]
    MAXIMIZE: _ClassVar[Direction]
DIRECTION_UNSPECIFIED: Direction
MINIMIZE: Direction
MAXIMIZE: Direction

class ExperimentConfig(_message.Message):
    __slots__ = ("objective_metric_name", "direction", "policy", "settings", "deadline", "gpu_hour_budget", "metric_strategy")
    class SettingsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    OBJECTIVE_METRIC_NAME_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    GPU_HOUR_BUDGET_FIELD_NUMBER: _ClassVar[int]
    METRIC_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    objective_metric_name: str
    direction: Direction
    policy: str
    settings: _containers.ScalarMap[str, str]
    deadline: _timestamp_pb2.Timestamp
    gpu_hour_budget: float
    metric_strategy: str
    def __init__(self, objective_metric_name: _Optional[str] = ..., direction: _Optional[_Union[Direction, str]] = ..., policy: _Optional[str] = ..., settings: _Optional[_Mapping[str, str]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., gpu_hour_budget: _Optional[float] = ..., metric_strategy: _Optional[str] = ...) -> None: ...

class ProgressPointRequest(_message.Message):
    __slots__ = ("experiment", "trial", "seq", "progress", "elapsed_seconds", "eta_seconds", "metrics", "timestamp", "config")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ETA_SECONDS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    experiment: str
    trial: str
    seq: int
    progress: float
    elapsed_seconds: float
    eta_seconds: float
    metrics: _containers.ScalarMap[str, float]
    timestamp: _timestamp_pb2.Timestamp
    config: ExperimentConfig
    def __init__(self, experiment: _Optional[str] = ..., trial: _Optional[str] = ..., seq: _Optional[int] = ..., progress: _Optional[float] = ..., elapsed_seconds: _Optional[float] = ..., eta_seconds: _Optional[float] = ..., metrics: _Optional[_Mapping[str, float]] = ..., timestamp: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., config: _Optional[_Union[ExperimentConfig, _Mapping]] = ...) -> None: ...

class DecisionReply(_message.Message):
    __slots__ = ("verdict", "reason", "policy", "evidence")
    class Verdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        VERDICT_UNSPECIFIED: _ClassVar[DecisionReply.Verdict]
        CONTINUE: _ClassVar[DecisionReply.Verdict]
        PRUNE: _ClassVar[DecisionReply.Verdict]
    VERDICT_UNSPECIFIED: DecisionReply.Verdict
    CONTINUE: DecisionReply.Verdict
    PRUNE: DecisionReply.Verdict
    class EvidenceEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    verdict: DecisionReply.Verdict
    reason: str
    policy: str
    evidence: _containers.ScalarMap[str, str]
    def __init__(self, verdict: _Optional[_Union[DecisionReply.Verdict, str]] = ..., reason: _Optional[str] = ..., policy: _Optional[str] = ..., evidence: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ReportFinalRequest(_message.Message):
    __slots__ = ("experiment", "trial", "state")
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        STATE_UNSPECIFIED: _ClassVar[ReportFinalRequest.State]
        COMPLETE: _ClassVar[ReportFinalRequest.State]
        PRUNED: _ClassVar[ReportFinalRequest.State]
        FAILED: _ClassVar[ReportFinalRequest.State]
    STATE_UNSPECIFIED: ReportFinalRequest.State
    COMPLETE: ReportFinalRequest.State
    PRUNED: ReportFinalRequest.State
    FAILED: ReportFinalRequest.State
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    experiment: str
    trial: str
    state: ReportFinalRequest.State
    def __init__(self, experiment: _Optional[str] = ..., trial: _Optional[str] = ..., state: _Optional[_Union[ReportFinalRequest.State, str]] = ...) -> None: ...

class ReportFinalReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ForgetRequest(_message.Message):
    __slots__ = ("experiment",)
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    experiment: str
    def __init__(self, experiment: _Optional[str] = ...) -> None: ...

class ForgetReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
