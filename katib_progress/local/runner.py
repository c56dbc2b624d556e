"""``run_sweep``: run a Katib Experiment on this machine, trials as local processes, live pruning.

The main loop (one thread) owns every trial's state; the status endpoint and the pipeline worker
only enqueue. Rules (Katib's, unless docs/local.md says otherwise):

- exit 0 with the objective in the observation log -> Succeeded; exit 0 without it ->
  MetricsUnavailable; non-zero exit -> Failed; pruned -> EarlyStopped (whatever the exit code).
- the experiment succeeds when the goal is reached (running trials are Killed), when
  maxTrialCount trials completed, or when the suggestion service has nothing more to suggest; it
  fails when more than maxFailedTrialCount trials failed (Failed + MetricsUnavailable).
"""

from __future__ import annotations

import logging
import secrets
import string
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from katib_progress.collector.pipeline import JobRef
from katib_progress.core.errors import ConfigError, KatibProgressError
from katib_progress.local import _state
from katib_progress.local._attempt import collect_output, new_attempt, own_metrics_file
from katib_progress.local._katib import ObservationReader, SuggestionClient
from katib_progress.local._logfile import sweep_logging
from katib_progress.local._pipeline import LocalPipeline, PruneRequest
from katib_progress.local._process import LaunchSpec, TrialProcess, Watchdog, new_token, stop_orphan
from katib_progress.local._services import Pruner, Store, store_service, suggestion_service
from katib_progress.local._signals import signals_as_interrupt
from katib_progress.local._view import SweepView, format_params
from katib_progress.local.endpoint import StatusEndpoint
from katib_progress.local.experiment import LocalExperiment
from katib_progress.local.summary import SweepSummary, TrialSummary, write_summary
from katib_progress.suggestion.pruning.restore import points_from_rows

_log = logging.getLogger(__name__)

_ALPHABET = string.ascii_lowercase + string.digits


@dataclass(frozen=True, slots=True)
class SweepOptions:
    workdir: Path | None = None
    grace_s: float = 5.0
    poll_s: float = 0.2
    live: bool | None = None  # None: a live view when stdout is a terminal
    fresh: bool = False
    suggestion_address: str | None = None
    log_file: bool = False  # service logs to <workdir>/sweep.log
    quiet_console: bool = False  # with log_file: the terminal shows only errors


@dataclass(frozen=True, slots=True)
class SweepResult:
    exit_code: int
    summary: SweepSummary
    workdir: Path
    message: str


def default_workdir(exp: LocalExperiment) -> Path:
    return Path(".katib-progress") / exp.name


def run_sweep(
    exp: LocalExperiment, options: SweepOptions | None = None, *, view: SweepView | None = None
) -> SweepResult:
    """Validate ``exp`` against the services first; only a valid experiment touches the work directory."""
    opts = options or SweepOptions()
    workdir = (opts.workdir or default_workdir(exp)).resolve()
    with signals_as_interrupt(), ExitStack() as stack:
        logs = stack.enter_context(sweep_logging(quiet_console=opts.quiet_console)) if opts.log_file else None
        address = stack.enter_context(suggestion_service(opts.suggestion_address))
        suggestions = SuggestionClient(address)
        stack.callback(suggestions.close)
        suggestions.validate(exp)
        pruner = Pruner.create(exp, address) if exp.doc.spec.early_stopping else None
        if pruner is not None:
            stack.callback(pruner.close)
        previous, moved = _state.prepare_workdir(exp, workdir, fresh=opts.fresh)
        if logs is not None:
            logs.attach(workdir / "sweep.log")
        if moved is not None:
            _log.warning("--fresh: earlier results of %s moved to %s", workdir, moved)
        store = stack.enter_context(store_service(workdir))
        sweep = _Sweep(exp, opts, workdir, previous, view or SweepView(live=opts.live))
        sweep.moved = moved
        return sweep.run(store, suggestions, pruner)


class _Sweep:
    def __init__(
        self,
        exp: LocalExperiment,
        opts: SweepOptions,
        workdir: Path,
        previous: SweepSummary | None,
        view: SweepView,
    ) -> None:
        self.exp = exp
        self.opts = opts
        self.workdir = workdir
        self.view = view
        self.book = _state.Book.resume(exp, workdir, previous)
        self.moved: Path | None = None
        self._procs: dict[str, TrialProcess] = {}
        self._jobs: dict[str, JobRef] = {}
        self._prunes: dict[str, PruneRequest] = {}
        self._kills: dict[str, tuple[str, str]] = {}
        self._exhausted = False
        self._t0 = time.monotonic()
        self._flush: Callable[[], bool] = lambda: True
        self._pruner: Pruner | None = None
        self._watchdog: Watchdog | None = None

    def run(self, store: Store, suggestions: SuggestionClient, pruner: Pruner | None) -> SweepResult:
        self._flush = lambda: store.sink.flush(10.0)
        self._pruner = pruner
        with ExitStack() as stack:
            self._watchdog = Watchdog(self.opts.grace_s)
            stack.callback(self._watchdog.close)
            reader = ObservationReader(store.address)
            stack.callback(reader.close)
            pipeline = LocalPipeline(store.sink, pruner.decide if pruner else None).start()
            stack.callback(pipeline.stop)
            endpoint = StatusEndpoint(pipeline.submit).start()
            stack.callback(endpoint.stop)
            stack.callback(self.view.stop)
            stack.callback(lambda: self.view.update(self._summary(), {}))
            self.view.start(self.exp, self.workdir)
            if self.moved is not None:
                self.view.event(f"--fresh: earlier results moved to {self.moved}")
            try:
                self._loop(pipeline, endpoint, reader, suggestions)
            except KeyboardInterrupt:
                self._stop_all(pipeline, endpoint, reader, status="Interrupted", reason="SweepInterrupted")
                self.book.finish(
                    "Interrupted", "SweepInterrupted", "interrupted; run the same command to resume"
                )
            except KatibProgressError as exc:
                _log.error("sweep stopped: %s", exc)
                self._stop_all(pipeline, endpoint, reader, status="Interrupted", reason="SweepError")
                self.book.finish("Failed", "SweepError", str(exc))
        summary = self._save()
        self.view.finish(summary, self.workdir)
        code = 0 if summary.status == "Succeeded" else (130 if summary.status == "Interrupted" else 1)
        return SweepResult(code, summary, self.workdir, summary.message)

    # -- the loop ------------------------------------------------------------------------------------

    def _loop(
        self,
        pipeline: LocalPipeline,
        endpoint: StatusEndpoint,
        reader: ObservationReader,
        sugg: SuggestionClient,
    ) -> None:
        self._restore_pruner(reader)
        rerun = self.book.to_rerun()
        if rerun:
            kept = sum(1 for t in self.book.trials.values() if t.terminal)
            self.view.event(
                f"resume: {kept} finished trial(s) kept; {len(rerun)} interrupted trial(s) run again "
                f"from scratch before new suggestions: {', '.join(rerun)}"
            )
        for name in rerun:
            pid = self.book.trials[name].pid
            if pid is not None:
                stop_orphan(pid, self.workdir / "trials" / name, self.opts.grace_s)
            reader.delete(name)
        while True:
            self._take_prunes(pipeline)
            for name, proc in list(self._procs.items()):
                proc.enforce(self.opts.grace_s)
                code = proc.poll()
                if code is not None:
                    self._finalize(name, code, pipeline, endpoint, reader)
            verdict = self.book.verdict(self._exhausted and not self._procs)
            if verdict is not None:
                status, reason, message = verdict
                if self._procs:
                    self._stop_all(pipeline, endpoint, reader, status="Killed", reason=reason)
                self.book.finish(status, reason, message)
                return
            self._launch(pipeline, endpoint, sugg)
            self.view.update(self._summary(), {n: pipeline.live(n) for n in self._procs})
            time.sleep(self.opts.poll_s)

    def _restore_pruner(self, reader: ObservationReader) -> None:
        """On resume: replay every finished trial's stored points and end to the pruning service, so
        comparative policies see the same history as a sweep that never stopped (each point keeps its
        stored ``trainjob/seq``: an engine that already knows it treats the replay as a repeat)."""
        if self._pruner is None:
            return
        finished = [t for t in self.book.trials.values() if t.terminal]
        for trial in finished:
            points = points_from_rows(self.exp.name, trial.name, reader.rows(trial.name))
            self._pruner.replay(trial.name, points, trial.status)
        if finished:
            self.view.event(f"resume: pruning history of {len(finished)} finished trial(s) restored")

    def _take_prunes(self, pipeline: LocalPipeline) -> None:
        while not pipeline.prunes.empty():
            request = pipeline.prunes.get_nowait()
            proc = self._procs.get(request.trial)
            if proc is None or proc.terminating:
                continue
            self._prunes[request.trial] = request
            proc.terminate()
            self.view.event(f"prune {request.trial}: {request.decision.reason}")

    def _launch(self, pipeline: LocalPipeline, endpoint: StatusEndpoint, sugg: SuggestionClient) -> None:
        room = self.book.room(len(self._procs))
        for name in self.book.to_rerun()[:room]:
            self._start(self.book.trials[name], pipeline, endpoint)
            room -= 1
        if room <= 0 or self._exhausted:
            return
        trials = list(self.book.trials.values())
        total = self.book.summary_requests + room
        kept = self.book.algorithm_settings
        assignments = sugg.get(self.exp, trials, current=room, total=total, kept=kept)
        self.book.summary_requests = total
        if not assignments:
            self._exhausted = True
            return
        for assignment in assignments[:room]:
            name = assignment.trial_name or self._new_name()
            trial = TrialSummary(name=name, params=dict(assignment.params), labels=dict(assignment.labels))
            self.book.put(trial)
            self._start(trial, pipeline, endpoint)

    def _new_name(self) -> str:
        while True:
            name = f"{self.exp.name}-" + "".join(secrets.choice(_ALPHABET) for _ in range(8))
            if name not in self.book.trials:
                return name

    def _start(self, trial: TrialSummary, pipeline: LocalPipeline, endpoint: StatusEndpoint) -> None:
        now = datetime.now(UTC)
        base = new_attempt(trial, now)
        try:
            rendered = self.exp.render(trial.name, trial.params)
        except ConfigError as exc:
            self._fail_start(base, "InvalidTemplate", str(exc), f"trial {trial.name} failed: {exc}")
            return
        ns = self.exp.namespace
        token = new_token()
        job = JobRef(ns, trial.name, uuid.uuid4().hex, self.exp.name, trial.name, now)
        endpoint.register(ns, trial.name, token)
        pipeline.track(job)
        trial_dir = self.workdir / "trials" / trial.name
        argv, env = rendered.argv, rendered.env
        collector = self.exp.collector
        if collector.kind == "File" and collector.path is not None:
            argv, env = own_metrics_file(collector.path, trial_dir, argv, env)
        spec = LaunchSpec(
            argv=argv,
            workdir=trial_dir,
            status_url=endpoint.url_for(ns, trial.name),
            token=token,
            env=env,
            merge_stderr=collector.kind == "StdOut",
        )
        try:
            proc = TrialProcess(spec, self._watchdog)
        except OSError as exc:
            endpoint.unregister(ns, trial.name)
            pipeline.untrack(job)
            message = f"cannot start {rendered.argv[0]!r}: {exc.strerror or exc}"
            self._fail_start(base, "StartFailed", message, f"trial {trial.name} failed to start: {message}")
            return
        self._procs[trial.name] = proc
        self._jobs[trial.name] = job
        self.book.put(base.model_copy(update={"pid": proc.pid}))
        self._save()
        self.view.event(f"start {trial.name} {format_params(trial.params)}")

    def _fail_start(self, base: TrialSummary, reason: str, message: str, event: str) -> None:
        update = {"status": "Failed", "reason": reason, "message": message, "ended_at": base.started_at}
        self.book.put(base.model_copy(update=update))
        self.view.event(event)

    def _finalize(
        self,
        name: str,
        code: int,
        pipeline: LocalPipeline,
        endpoint: StatusEndpoint,
        reader: ObservationReader,
    ) -> None:
        proc = self._procs.pop(name)
        job = self._jobs.pop(name)
        elapsed = time.monotonic() - proc.started
        # Katib reads the observation log once, when the job completes: the trial's last snapshots
        # must be in the store first.
        pipeline.drain()
        endpoint.unregister(job.namespace, name)
        pipeline.untrack(job)
        if not self._flush():
            _log.warning("observation rows of %s may be incomplete (flush timed out)", name)
        collect_note = collect_output(self.exp, self.workdir / "trials" / name, reader)
        observation = reader.observation(name, self.exp.strategies(), pipeline.non_finite(name))
        live = pipeline.live(name)
        trial = self.book.trials[name]
        update = _state.outcome(
            self.exp,
            code,
            observation,
            self._prunes.pop(name, None),
            self._kills.pop(name, None),
            workdir=self.workdir / "trials" / name,
        )
        update.update(
            exit_code=code,
            elapsed_s=elapsed,
            compute_s=trial.compute_s + elapsed,
            ended_at=datetime.now(UTC),
            observation=observation,
            objective=observation.get(self.exp.doc.spec.objective.objective_metric_name),
        )
        if live is not None:
            update.update(progress=live.progress, eta_s=live.eta_s, latest_metrics=dict(live.metrics))
        if collect_note and update.get("status") in ("MetricsUnavailable", "Succeeded"):
            update["message"] = (str(update.get("message") or "") + f" ({collect_note})").strip()
        done = trial.model_copy(update=update)
        self.book.put(done)
        if self._pruner is not None:
            self._pruner.finish(name, done.status)
        self._save()
        self.view.event(_state.describe(done, self.exp.doc.spec.objective.objective_metric_name))

    def _stop_all(
        self,
        pipeline: LocalPipeline,
        endpoint: StatusEndpoint,
        reader: ObservationReader,
        *,
        status: str,
        reason: str,
    ) -> None:
        for name, proc in self._procs.items():
            self._kills[name] = (status, reason)
            proc.terminate()
        deadline = time.monotonic() + self.opts.grace_s
        while self._procs:
            for name, proc in list(self._procs.items()):
                if time.monotonic() >= deadline:
                    proc.enforce(0.0)
                code = proc.poll()
                if code is not None:
                    self._finalize(name, code, pipeline, endpoint, reader)
            time.sleep(0.05)

    def _summary(self) -> SweepSummary:
        now = time.monotonic()
        running = sum(now - proc.started for proc in self._procs.values())
        return self.book.summary(wall_s=now - self._t0, running_s=running)

    def _save(self) -> SweepSummary:
        summary = self._summary()
        write_summary(self.workdir, summary)
        return summary


__all__ = ["SweepOptions", "SweepResult", "default_workdir", "run_sweep"]
