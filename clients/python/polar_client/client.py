"""HTTP client for a Polar rollout server (stdlib only: urllib, http.server, threading).

Speaks both wire shapes a trainer meets:

* Polar's own (this repository's ``src/rollout/``): ``GET /rollout/task/{id}`` is the reference's TaskStatus
  ``{task_id, status: "running"|"completed"|"failed"|"cancelled", total_sessions, completed_sessions,
  results: [SessionResult], result_paths: []}`` plus Polar's keys ``polar_status`` ("RUNNING", "COMPLETED", …),
  ``num_samples``, ``created_at``, ``updated_at``, ``sessions: [{session_id, sample_index, status, node_id, attempt,
  reward, error}]``, ``group`` (the evaluated group without token data, or null), ``callback`` and ``error``. Each
  SessionResult's ``metadata`` carries ``sample_index``, ``reward``, ``attempt`` and the task's ``group_id`` /
  ``policy_version`` / ``rollout_step``. Trainer extensions: ``GET /rollout/groups?ready=1``,
  ``GET /rollout/groups/{task_id}/trajectories`` (token data and server-side advantages),
  ``POST /rollout/groups/{task_id}/ack`` → ``{task_id, group_id, acked}``; callbacks ``TaskResult`` plus ``group``;
  auth ``Authorization: Bearer``.
* The reference Polar's: ``GET /rollout/task/{id}`` → ``{task_id, status: "running"|"completed"|"failed"|
  "cancelling"|"cancelled", total_sessions, completed_sessions, results: [SessionResult], result_paths}`` (no
  ``polar_status``, no ``group``, no group endpoints); callbacks ``TaskResult {task_id, status, results,
  result_paths}``; auth ``x-polar-control-token``.

Every request carries the token in both headers, and :class:`TaskStatus` normalises both status shapes.
Source: README.md "Trainer API" of this repository.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Mapping

__all__ = [
    "PolarClient",
    "PolarError",
    "PolarTimeout",
    "TaskStatus",
    "CallbackServer",
    "TERMINAL_STATUSES",
]

#: Normalised (lower-case) task statuses after which nothing more happens to a task.
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})


class PolarError(Exception):
    """A request the server refused or that could not be sent.

    Attributes: ``status`` (HTTP status, or None when no answer came), ``body`` (parsed JSON or text), ``url``.
    """

    def __init__(self, message: str, *, status: int | None = None, body: Any = None, url: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.url = url


class PolarTimeout(PolarError):
    """A wait ran past its timeout; ``last`` holds the last :class:`TaskStatus` seen (or None)."""

    def __init__(self, message: str, last: "TaskStatus | None" = None) -> None:
        super().__init__(message)
        self.last = last


@dataclass
class TaskStatus:
    """A task's status in one shape, from either server.

    ``status`` is lower-case (running, completed, failed, cancelling, cancelled); ``total_sessions`` is num_samples;
    ``completed_sessions`` counts finished sessions; ``results`` is the list of SessionResult dicts (both servers send
    them); ``polar_status`` and ``group`` are Polar's extra keys (None from the reference server, and ``group`` None
    until the task's group is evaluated); ``raw`` is the body as received.
    """

    task_id: str
    status: str
    total_sessions: int
    completed_sessions: int
    results: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    polar_status: str | None = None
    group: dict[str, Any] | None = None

    @property
    def from_polar(self) -> bool:
        """True when the body came from this repository's server (it has ``polar_status`` or ``group``), whose
        groups are served, with the server's advantages, by ``GET /rollout/groups/{task_id}/trajectories`` and must
        be acknowledged; False for the reference Polar, whose ``results`` are all there is."""
        return "polar_status" in self.raw or "group" in self.raw

    @property
    def done(self) -> bool:
        """True once the task is completed, failed or cancelled."""
        return self.status in TERMINAL_STATUSES

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> "TaskStatus":
        """Normalise a ``GET /rollout/task/{id}`` body (either shape).

        :raises PolarError: when ``task_id`` or ``status`` is missing.
        """
        if not isinstance(body, Mapping) or "task_id" not in body or "status" not in body:
            raise PolarError(f"not a task status: {str(body)[:200]}", body=body)
        status = str(body["status"]).lower()
        results = body.get("results")
        results_list = list(results) if isinstance(results, list) else []
        if "total_sessions" in body:
            total = int(body.get("total_sessions") or 0)
            completed = int(body.get("completed_sessions") or 0)
        else:
            sessions = body.get("sessions") or []
            total = int(body.get("num_samples") or len(sessions))
            completed = sum(1 for s in sessions if str(s.get("status", "")).upper() in {"COMPLETED", "ERROR", "TIMEOUT", "CANCELLED"})
        group = body.get("group")
        polar_status = body.get("polar_status")
        return cls(task_id=str(body["task_id"]), status=status, total_sessions=total, completed_sessions=completed, results=results_list, raw=dict(body),
                   polar_status=None if polar_status is None else str(polar_status), group=dict(group) if isinstance(group, Mapping) else None)


#: Answers of a rollout server that is restarting (or of a proxy in front of it): unreachable (None), 502, 503, 504.
_RESTARTING = (None, 502, 503, 504)


class PolarClient:
    """Client of one rollout server.

    :param url: base URL, e.g. ``http://127.0.0.1:8100``.
    :param token: control-plane token (sent as ``Authorization: Bearer`` and ``x-polar-control-token``), or None.
    :param timeout: per-request timeout in seconds (a pause fan-out gets its own, longer one).
    """

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # ------------------------------------------------------------------ transport

    def request(self, method: str, path: str, body: Any = None, *, timeout: float | None = None, query: Mapping[str, Any] | None = None) -> Any:
        """One JSON request; returns the parsed body (None for an empty one).

        :raises PolarError: on a non-2xx answer (``status`` and ``body`` set) or when the server cannot be reached.
        """
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode([(k, v) for k, v in query.items() if v is not None], doseq=True)
        data = None if body is None else json.dumps(body).encode()
        headers = {"accept": "application/json"}
        if data is not None:
            headers["content-type"] = "application/json"
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
            headers["x-polar-control-token"] = self.token
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as err:
            text = err.read().decode(errors="replace")
            parsed = _parse(text)
            message = parsed.get("error") if isinstance(parsed, dict) else None
            if isinstance(message, dict):
                message = message.get("message")
            raise PolarError(f"{method} {path}: HTTP {err.code}: {message or text[:300]}", status=err.code, body=parsed, url=url) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
            raise PolarError(f"{method} {path}: cannot reach {self.url}: {getattr(err, 'reason', err)}", url=url) from None
        return _parse(text) if text else None

    # ------------------------------------------------------------------ tasks

    def submit(self, task: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /rollout/task/submit`` with a TaskRequest dict; returns the answer (Polar: ``{task_id, status:
        "running", sessions: <count>, previous_run}``; the reference: ``{task_id, status}``).

        :raises PolarError: 400/422 for an invalid TaskRequest (the message names the field), 409 on a duplicate.
        """
        return self.request("POST", "/rollout/task/submit", dict(task))

    def task(self, task_id: str) -> TaskStatus:
        """``GET /rollout/task/{task_id}``, normalised. :raises PolarError: 404 for an unknown task."""
        return TaskStatus.parse(self.request("GET", f"/rollout/task/{urllib.parse.quote(task_id, safe='')}"))

    def cancel(self, task_id: str) -> dict[str, Any]:
        """``DELETE /rollout/task/{task_id}``: cancel its unfinished sessions."""
        return self.request("DELETE", f"/rollout/task/{urllib.parse.quote(task_id, safe='')}")

    def status(self) -> dict[str, Any]:
        """``GET /rollout/status``: task and session counts, nodes, ready groups."""
        return self.request("GET", "/rollout/status")

    def health(self) -> dict[str, Any]:
        """``GET /health``."""
        return self.request("GET", "/health")

    def wait(self, task_id: str, *, timeout: float | None = None, poll_interval: float = 0.5, callback: "CallbackServer | None" = None) -> TaskStatus:
        """Block until the task is completed, failed or cancelled.

        With ``callback`` (a running :class:`CallbackServer` whose URL was the task's ``callback_url``) it waits for
        the callback, re-checking the status every ``poll_interval`` × 10 s in case the callback is lost; without it,
        it polls every ``poll_interval`` seconds. A server that cannot be reached or answers 502/503/504 (it is
        restarting: tasks survive that, README "Stopping and restarting never cancels work") is asked again at the
        next poll until ``timeout``.

        :param timeout: seconds, None = forever.
        :raises PolarTimeout: past ``timeout`` (``last`` = last status seen).
        :raises PolarError: past ``timeout`` while the server cannot be reached (that error), or on any other error
            answer (e.g. 404 for an unknown task) at once.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        last: TaskStatus | None = None
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            try:
                if callback is not None and callback.received(task_id) is not None:
                    return self.task(task_id)
                last = self.task(task_id)
            except PolarError as err:
                if err.status not in _RESTARTING or (remaining is not None and remaining <= 0):
                    raise
                time.sleep(poll_interval if remaining is None else min(poll_interval, remaining))
                continue
            if last.done:
                return last
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise PolarTimeout(f"task {task_id} still {last.status} after {timeout} s ({last.completed_sessions}/{last.total_sessions} sessions done)", last)
            step = poll_interval * (10 if callback is not None else 1)
            step = step if remaining is None else min(step, remaining)
            if callback is not None:
                callback.wait_for(task_id, step)
            else:
                time.sleep(step)

    def wait_all(self, task_ids: Iterable[str], *, timeout: float | None = None, poll_interval: float = 0.5) -> dict[str, TaskStatus]:
        """Wait for several tasks (one shared ``timeout``); returns their final statuses by task id."""
        deadline = None if timeout is None else time.monotonic() + timeout
        out: dict[str, TaskStatus] = {}
        for task_id in task_ids:
            left = None if deadline is None else max(0.001, deadline - time.monotonic())
            out[task_id] = self.wait(task_id, timeout=left, poll_interval=poll_interval)
        return out

    # ------------------------------------------------------------------ groups (Polar trainer API)

    def ready_groups(self, *, include_trajectories: bool = True, std: str | None = None) -> list[dict[str, Any]]:
        """``GET /rollout/groups?ready=1``: evaluated, unacknowledged groups, oldest first.

        :param include_trajectories: add every session's token data (``trajectories``), needed by :func:`to_samples`.
        :param std: ``"unbiased"`` for Bessel-corrected GRPO (verl/TRL); default population.
        """
        query: dict[str, Any] = {"ready": "1"}
        if include_trajectories:
            query["include"] = "trajectories"
        if std:
            query["std"] = std
        return list(self.request("GET", "/rollout/groups", query=query)["groups"])

    def group(self, task_id: str, *, std: str | None = None) -> dict[str, Any]:
        """``GET /rollout/groups/{task_id}/trajectories``: one group with token data (acknowledged ones too)."""
        return self.request("GET", f"/rollout/groups/{urllib.parse.quote(task_id, safe='')}/trajectories", query={"std": std} if std else None)

    def ack(self, task_id: str) -> bool:
        """``POST /rollout/groups/{task_id}/ack`` (answer ``{task_id, group_id, acked}``); False when it was already
        acknowledged or does not exist."""
        return bool(self.request("POST", f"/rollout/groups/{urllib.parse.quote(task_id, safe='')}/ack", {})["acked"])

    # ------------------------------------------------------------------ weight sync fan-out

    def pause(self, *, timeout: float = 300.0) -> dict[str, Any]:
        """Hold new model calls on every gateway and wait for in-flight ones to drain (``POST
        /rollout/admin/inference/pause``). Returns ``{ok, nodes: [...]}``.

        :raises PolarError: when a node failed or did not drain within ``timeout`` seconds (status 502; ``body``
            names the nodes).
        """
        return self.request("POST", "/rollout/admin/inference/pause", {"timeout_s": timeout}, timeout=timeout + 10)

    def resume(self, *, timeout: float = 60.0) -> dict[str, Any]:
        """Release held model calls on every gateway (``POST /rollout/admin/inference/resume``)."""
        return self.request("POST", "/rollout/admin/inference/resume", {"timeout_s": timeout}, timeout=timeout + 10)

    def set_policy_version(self, version: str | int, *, timeout: float = 60.0) -> dict[str, Any]:
        """Stamp ``version`` on every later completion, on every gateway (``POST /rollout/admin/policy_version``)."""
        return self.request("POST", "/rollout/admin/policy_version", {"policy_version": str(version), "timeout_s": timeout}, timeout=timeout + 10)


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


class CallbackServer:
    """A ``callback_url`` listener on 127.0.0.1 (a thread running ``http.server``).

    Accepts both callback shapes (Polar's ``TaskResult {task_id, status, results, result_paths}`` plus ``group``, and
    the reference's plain ``TaskResult``), answers 200, and keeps the latest payload per task.
    Use as a context manager; ``url`` is what to put in TaskRequest.callback_url.

    :param token: when set, a callback must carry ``Authorization: Bearer <token>`` (Polar sends
        ``metadata.callback_token`` so); others get 401.
    :param on_result: called (in the server thread) with each payload.
    """

    def __init__(self, *, token: str | None = None, on_result: Callable[[dict[str, Any]], None] | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self._payloads: dict[str, dict[str, Any]] = {}
        self._cond = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                if token and self.headers.get("authorization") != f"Bearer {token}":
                    self._answer(401, {"ok": False, "reason": "missing or wrong token"})
                    return
                length = int(self.headers.get("content-length") or 0)
                payload = _parse(self.rfile.read(length).decode(errors="replace"))
                if not isinstance(payload, dict) or not isinstance(payload.get("task_id"), str):
                    self._answer(400, {"ok": False, "reason": "invalid payload: needs task_id"})
                    return
                with outer._cond:
                    outer._payloads[payload["task_id"]] = payload
                    outer._cond.notify_all()
                if on_result is not None:
                    on_result(payload)
                self._answer(200, {"ok": True})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (quiet)
                return

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread = threading.Thread(target=lambda: self._server.serve_forever(poll_interval=0.05), name="polar-callback", daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/callback``."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/callback"

    def start(self) -> "CallbackServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "CallbackServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def received(self, task_id: str) -> dict[str, Any] | None:
        """The latest callback payload for ``task_id``, or None."""
        with self._cond:
            return self._payloads.get(task_id)

    def wait_for(self, task_id: str, timeout: float | None) -> dict[str, Any] | None:
        """Block up to ``timeout`` seconds for ``task_id``'s callback; the payload or None."""
        with self._cond:
            self._cond.wait_for(lambda: task_id in self._payloads, timeout=timeout)
            return self._payloads.get(task_id)
