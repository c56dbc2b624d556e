"""Stand-in for Katib's ``earlystopping-medianstop`` image.

Written from kubeflow/katib (commit 33c8ff4): cmd/earlystopping/medianstop/v1beta1/main.py (one gRPC
server with the EarlyStopping service only, no health service, ``add_insecure_port("0.0.0.0:6788")``)
and pkg/earlystopping/v1beta1/medianstop/service.py (MedianStopService):

- settings ``min_trials_required`` (default 3, > 0) and ``start_step`` (default 4, >= 1); any other
  name is invalid; the algorithm name must be ``medianstop``;
- GetEarlyStoppingRules: on the first call reads the settings, the comparison (MAXIMIZE -> LESS,
  else GREATER), the objective and the DB manager address (must be ``host:port``); then, for each
  trial sent with condition SUCCEEDED not seen before, averages the first ``start_step`` values of
  its objective log from the DB manager; once ``min_trials_required`` trials are averaged, returns one
  rule ``objective <comparison> mean-of-averages`` at ``start_step`` (a mean, not a median, as upstream);
- SetTrialStatus: reads the Trial in its own namespace and appends ``EarlyStopped`` (status True,
  reason TrialEarlyStopped, message "Trial is early stopped") to its conditions with a status patch.

The pod's namespace comes from ``KATIBMODEL_NAMESPACE`` (upstream reads the service-account
namespace file) and the API server from ``KUBECONFIG`` (upstream: the in-cluster config).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from concurrent import futures
from datetime import datetime
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc
from kubernetes import client, config

pb: Any = katib_api_pb2
APISERVER_TIMEOUT = 120


class MedianStopService(katib_api_pb2_grpc.EarlyStoppingServicer):
    def __init__(self) -> None:
        self.is_first_run = True
        self.min_trials_required = 3
        self.start_step = 4
        self.trials_avg_history: dict[str, float] = {}
        self.namespace = os.environ.get("KATIBMODEL_NAMESPACE", "default")
        config.load_kube_config()
        self.api = client.CustomObjectsApi()

    @staticmethod
    def validate(spec: Any) -> tuple[bool, str]:
        if spec.algorithm_name != "medianstop":
            return False, f"unknown algorithm name {spec.algorithm_name}"
        for s in spec.algorithm_settings:
            try:
                if s.name == "min_trials_required":
                    if not int(s.value) > 0:
                        return False, "min_trials_required must be greater than zero (>0)"
                elif s.name == "start_step":
                    if not int(s.value) >= 1:
                        return False, "start_step must be greater or equal than one (>=1)"
                else:
                    return False, f"unknown setting {s.name} for algorithm medianstop"
            except Exception as e:
                return False, f"failed to validate {s.name}({s.value}): {e}"
        return True, ""

    def ValidateEarlyStoppingSettings(self, request: Any, context: Any) -> Any:
        ok, message = self.validate(request.early_stopping)
        if not ok:
            context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
            context.set_details(message)
        return pb.ValidateEarlyStoppingSettingsReply()

    def GetEarlyStoppingRules(self, request: Any, context: Any) -> Any:
        if self.is_first_run:
            self.is_first_run = False
            for s in request.experiment.spec.early_stopping.algorithm_settings:
                if s.name == "min_trials_required":
                    self.min_trials_required = int(s.value)
                elif s.name == "start_step":
                    self.start_step = int(s.value)
            maximize = request.experiment.spec.objective.type == pb.MAXIMIZE
            self.comparison = pb.LESS if maximize else pb.GREATER
            self.objective_metric = request.experiment.spec.objective.objective_metric_name
            self.db_manager_address = request.db_manager_address.split(":")
            if len(self.db_manager_address) != 2:
                raise Exception(f"Invalid Katib DB manager service address: {self.db_manager_address}")
        rules = []
        median = self.median(request.trials)
        if median is not None:
            rules.append(
                pb.EarlyStoppingRule(
                    name=self.objective_metric,
                    value=str(median),
                    comparison=self.comparison,
                    start_step=self.start_step,
                )
            )
        return pb.GetEarlyStoppingRulesReply(early_stopping_rules=rules)

    def median(self, trials: Any) -> float | None:
        for trial in trials:
            if trial.name in self.trials_avg_history or trial.status.condition != pb.TrialStatus.SUCCEEDED:
                continue
            host, port = self.db_manager_address
            with grpc.insecure_channel(f"{host}:{port}") as channel:
                reply = katib_api_pb2_grpc.DBManagerStub(channel).GetObservationLog(
                    pb.GetObservationLogRequest(trial_name=trial.name, metric_name=self.objective_metric),
                    timeout=APISERVER_TIMEOUT,
                )
            first = reply.observation_log.metric_logs[: self.start_step]
            # upstream divides by len(first) unguarded: a trial without rows raises (gRPC UNKNOWN)
            self.trials_avg_history[trial.name] = sum(float(m.metric.value) for m in first) / len(first)
        if len(self.trials_avg_history) >= self.min_trials_required:
            return sum(self.trials_avg_history.values()) / len(self.trials_avg_history)
        return None

    def SetTrialStatus(self, request: Any, context: Any) -> Any:
        trial = self.api.get_namespaced_custom_object(
            "kubeflow.org", "v1beta1", self.namespace, "trials", request.trial_name
        )
        stamp = datetime.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        trial["status"]["conditions"].append(
            {
                "type": "EarlyStopped",
                "status": "True",
                "reason": "TrialEarlyStopped",
                "message": "Trial is early stopped",
                "lastUpdateTime": stamp,
                "lastTransitionTime": stamp,
            }
        )
        self.api.patch_namespaced_custom_object_status(
            "kubeflow.org", "v1beta1", self.namespace, "trials", request.trial_name, trial
        )
        return pb.SetTrialStatusReply()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="0.0.0.0:6788")  # main.py: DEFAULT_PORT
    args = parser.parse_args(argv)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=10))
    katib_api_pb2_grpc.add_EarlyStoppingServicer_to_server(MedianStopService(), server)
    server.add_insecure_port(args.address)  # raises when the address cannot be bound
    server.start()
    print(f"Start Median Stop service at address {args.address}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
