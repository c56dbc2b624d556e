"""Kubernetes client construction and API error classification."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from katib_progress.core.errors import ConfigError, PermanentError, TemporaryError

_log = logging.getLogger(__name__)

_T = TypeVar("_T")

# 4xx codes worth retrying: timeout, conflict, gone (re-list), too many requests.
_RETRYABLE_4XX = frozenset({408, 409, 410, 429})


def load_api_client(kubeconfig: str | None = None, *, context: str | None = None) -> client.ApiClient:
    """An ``ApiClient`` from ``kubeconfig``; without one, in-cluster config when running in a pod,
    else the default kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``)."""
    try:
        if kubeconfig is not None:
            if not os.path.isfile(kubeconfig):
                raise ConfigError("kubeconfig", f"no such file: {kubeconfig!r}")
            return config.new_client_from_config(config_file=kubeconfig, context=context)
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            _log.info("using in-cluster Kubernetes configuration")
            return client.ApiClient(configuration)
        return config.new_client_from_config(context=context)
    except ConfigException as exc:
        raise ConfigError("kubeconfig", str(exc)) from exc


def context_namespace(kubeconfig: str | None = None) -> str:
    """The namespace ``kubectl`` would use: the current context's of ``kubeconfig`` (else of
    ``$KUBECONFIG`` or ``~/.kube/config``), else ``default`` (no kubeconfig, or a context naming none)."""
    try:
        _contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)
    except (ConfigException, OSError, ValueError, yaml.YAMLError):
        return "default"
    namespace = (current or {}).get("context", {}).get("namespace")
    return str(namespace) if namespace else "default"


def retry_after(exc: client.ApiException) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


#: what a Kubernetes client call raises when the API server cannot be reached: a socket error, or
#: urllib3's own (MaxRetryError, ProtocolError: not OSError). Both are temporary (``classify``); the
#: e2e tier found the final-metrics thread dead of an uncaught MaxRetryError after an API restart.
TRANSPORT_ERRORS = (OSError, urllib3.exceptions.HTTPError)


def classify(exc: BaseException) -> TemporaryError | PermanentError:
    """Map a client failure to the project's error hierarchy (the original is the ``__cause__``)."""
    if isinstance(exc, TemporaryError | PermanentError):
        return exc
    if isinstance(exc, client.ApiException):
        status = int(exc.status or 0)
        message = f"Kubernetes API {status} {exc.reason or ''}".strip()
        if status == 0 or status >= 500 or status in _RETRYABLE_4XX:
            error: TemporaryError | PermanentError = TemporaryError(message, delay=retry_after(exc))
        else:
            error = PermanentError(message)
    elif isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        error = TemporaryError(f"Kubernetes API unreachable: {type(exc).__name__}: {exc}")
    else:
        raise TypeError(f"exc: not a Kubernetes client failure: {exc!r}") from exc
    error.__cause__ = exc
    return error


def call_or_none(call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T | None:
    """Run one Kubernetes API call; None when the object is gone (404), every other failure classified."""
    try:
        return call(*args, **kwargs)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise classify(exc) from exc
    except TRANSPORT_ERRORS as exc:
        raise classify(exc) from exc
