"""``medianstop``: Katib's median stopping rule, decided live from the trial's reports.

Katib splits it in two (kubeflow/katib at 33c8ff4): the early-stopping service computes a rule when
new trials are created (pkg/earlystopping/v1beta1/medianstop/service.py), and the metrics-collector
sidecar injected into each trial pod applies it to the trial's log
(cmd/metricscollector/v1beta1/file-metricscollector/main.go). Push trials have no sidecar, so
nothing applied it to them. Here both halves run on the progress points our collector forwards: each
point carrying a finite objective is one report, as it is one row of the trial's observation log
(the collector writes none for NaN or infinities), and one line of the log a sidecar reads. Each
rule names the upstream function it follows:

- which trials: those whose latest condition is SUCCEEDED (service.py ``get_median_value``:
  ``trial.status.condition == SUCCEEDED_TRIAL``; an early-stopped or failed trial never counts), as
  known when the rule was made for the trial: Katib asks GetEarlyStoppingRules after GetSuggestions and
  gives its rule to the trials created from that reply
  (pkg/controller.v1beta1/suggestion/suggestionclient/suggestionclient.go ``SyncAssignments``), so a
  trial's rule is the one of the last call that did not carry it yet (``ExperimentState.katib_calls``).
  Without such a call (our collector alone; a trial created before the first call a restarted service
  saw), the trials that had completed when the trial first reported;
- what of each: the mean of its first ``start_step`` reports, its first ``start_step`` rows
  (service.py ``get_median_value``: ``metric_logs[: self.start_step]``, ``metric_sum /
  len(first_x_logs)``); a trial with no report here is left out (Katib's service would fail the call
  dividing by zero);
- the bar: the mean of those means, summed in the order Katib's service first saw each trial succeeded
  (``sum(list(self.trials_avg_history.values())) / len(...)``: a mean, not a median, as upstream), and
  only once at least ``min_trials_required`` trials count (``len(...) >= self.min_trials_required``),
  else no rule and the trial runs to its end;
- the comparison: the trial's best value so far, the lowest when minimizing, the highest when maximizing
  (main.go ``updateStopRules``: ``optimalObjValue``), stops it when it is worse than the bar, strictly
  (service.py ``GetEarlyStoppingRules``: MAXIMIZE -> ``LESS``, else ``GREATER``; main.go
  ``updateStopRules``: ``metricValue < ruleValue`` / ``metricValue > ruleValue``);
- when: only at the trial's ``start_step``-th report (main.go ``updateStopRules``: the rule's step
  counter is decremented at each report and the rule is checked when it reaches 0, never again).
"""

from __future__ import annotations

from collections.abc import Sequence

from katib_progress.core.types import Decision, Verdict
from katib_progress.suggestion.pruning._history import Direction, ExperimentState, TrialHistory, TrialState
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext


def reference_trials(state: ExperimentState, trial: TrialHistory) -> tuple[str, ...]:
    """The trials ``trial``'s rule was made from, in Katib's order (see the module docstring)."""
    if not state.katib_calls:
        return trial.completed_before
    count = state.katib_calls[-1][1]
    for i, (names, _) in enumerate(state.katib_calls):
        if trial.name in names:  # created after the call before this one
            if i == 0:  # before every call this service saw (it restarted): its creation is unknown
                return trial.completed_before
            count = state.katib_calls[i - 1][1]
            break
    return tuple(state.katib_succeeded[:count])


def katib_rule(
    state: ExperimentState, reference: Sequence[str], start_step: int, min_trials_required: int
) -> tuple[float, int] | None:
    """(bar, trials averaged) as medianstop/service.py ``get_median_value`` computes it over
    ``reference``; None below ``min_trials_required`` trials."""
    averages: list[float] = []
    for name in reference:
        peer = state.trials.get(name)
        # service.py get_median_value: first_x_logs = metric_logs[: self.start_step]
        first = [] if peer is None else peer.reports[:start_step]
        if first:
            total = 0.0
            for value in first:  # service.py: metric_sum += float(log.metric.value)
                total += value
            averages.append(total / len(first))  # new_average = metric_sum / len(first_x_logs)
    # service.py get_median_value: len(self.trials_avg_history) >= self.min_trials_required
    if len(averages) < min_trials_required:
        return None
    bar = 0.0
    for average in averages:  # left to right, as Python 3.11's sum() (Katib's image) adds floats
        bar += average
    return bar / len(averages), len(averages)


def best_so_far(reports: Sequence[float], direction: Direction) -> float:
    """main.go ``updateStopRules``' ``optimalObjValue`` after the last report: the first value, then
    replaced by each strictly better one."""
    best = reports[0]
    for value in reports[1:]:
        if direction.better(value, best):
            best = value
    return best


class MedianStopPolicy(Policy):
    """Katib's ``medianstop`` (settings ``min_trials_required``, ``start_step``: Katib's defaults 3
    and 4)."""

    name = "medianstop"

    def __init__(self, *, min_trials_required: int = 3, start_step: int = 4) -> None:
        if min_trials_required < 1:
            raise ValueError(f"min_trials_required must be >= 1, got {min_trials_required}")
        if start_step < 1:
            raise ValueError(f"medianstop needs start_step >= 1, got {start_step}")
        self.min_trials_required = min_trials_required
        self.start_step = start_step

    def decide(self, ctx: PolicyContext) -> Decision:
        trial = ctx.trial
        step = len(trial.reports)
        # main.go updateStopRules: metricStartStep[rule.Name]--, checked only when it reaches 0
        if step != self.start_step or trial.state is not TrialState.RUNNING:
            return Decision(
                Verdict.CONTINUE,
                f"{ctx.objective} report {step}; judged at report {self.start_step} only",
                self.name,
            )
        reference = reference_trials(ctx.experiment, trial)
        rule = katib_rule(ctx.experiment, reference, self.start_step, self.min_trials_required)
        if rule is None:
            return Decision(
                Verdict.CONTINUE,
                f"no rule: fewer than {self.min_trials_required} succeeded trials when it started",
                self.name,
                {"succeeded": float(len(reference))},
            )
        bar, count = rule
        # main.go updateStopRules: metricValue = *optimalObjValue; service.py GetEarlyStoppingRules:
        # MAXIMIZE -> LESS, else GREATER; main.go: metricValue < ruleValue / metricValue > ruleValue
        best = best_so_far(trial.reports, ctx.direction)
        worse = best > bar if ctx.direction is Direction.MINIMIZE else best < bar
        evidence: dict[str, float | str] = {"best": best, "bar": bar, "trials": float(count)}
        side = "above" if ctx.direction is Direction.MINIMIZE else "below"
        if worse:
            return Decision(
                Verdict.PRUNE,
                f"{ctx.objective} best {best:.4g} at report {step} is {side} the mean {bar:.4g} of "
                f"{count} succeeded trials' first {self.start_step} reports",
                self.name,
                evidence,
            )
        return Decision(
            Verdict.CONTINUE,
            f"{ctx.objective} best {best:.4g} at report {step} is not worse than the mean {bar:.4g} of "
            f"{count} succeeded trials",
            self.name,
            evidence,
        )
