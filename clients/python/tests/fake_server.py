"""A stand-in rollout server for the client tests (http.server in a thread), serving recorded group payloads.

It keeps every request it got (method, path, query, headers, body) so tests can check what the client sent, and
answers in this repository's shapes (``src/rollout/``, as recorded from ``polar serve --with-sim``: see
``fixtures/polar-task-status.json`` and ``fixtures/polar-task-group.json``) or, with ``shape="reference"``, in the
reference Python Polar's (its TaskStatus only: no ``polar_status``, no ``group``)."""

from __future__ import annotations

import copy
import json
import os
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def load_fixture(name: str) -> dict[str, Any]:
    with open(os.path.join(FIXTURES, name), encoding="utf8") as fh:
        return json.load(fh)


def to_reference_task_result(group: dict[str, Any]) -> dict[str, Any]:
    """A recorded Polar group in the reference Polar's TaskResult shape: lower-case status, `results` as
    SessionResults, `finish_reason` a string, the reward under `evaluation.reward`, no server-side advantages."""
    results = []
    for t in copy.deepcopy(group["trajectories"]):
        for trace in t["trajectory"]["traces"]:
            trace["finish_reason"] = trace["finish_reason"]["unified"]
        evaluation = t["trajectory"]["metadata"].get("evaluation") or {}
        t["trajectory"]["metadata"]["evaluation"] = {"reward": evaluation.get("outcome_reward"), "resolved": evaluation.get("outcome_reward") == 1}
        for key in ("sample_index", "reward", "grpo_advantage", "loo_advantage"):
            t.pop(key)
        t.pop("attempt", None)
        t["metadata"] = {}
        results.append(t)
    return {"task_id": group["task_id"], "status": "completed", "total_sessions": len(results), "completed_sessions": len(results), "results": results, "result_paths": []}


#: The task metadata keys the server copies into each SessionResult's metadata (reference-shapes.ts schedulerLabels).
LABELS = ("group_id", "policy_version", "rollout_step")


def to_session_result(entry: dict[str, Any], task_metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """A group's trajectory entry as this server puts it in `results` of `GET /rollout/task/{id}`
    (reference-shapes.ts referenceSessionResult): `finish_reason` a string, `trajectory.metadata` with `trace_count`
    and the task's labels, `metadata` `{group_id?, policy_version?, rollout_step?, sample_index, reward, attempt}`, no
    top-level advantages."""
    e = copy.deepcopy(entry)
    labels = {k: str(v) if k == "group_id" else v for k, v in (task_metadata or {}).items() if k in LABELS and v is not None}
    traces = e["trajectory"]["traces"]
    for trace in traces:
        if isinstance(trace.get("finish_reason"), dict):
            trace["finish_reason"] = trace["finish_reason"]["unified"]
    return {
        "session_id": e["session_id"],
        "task_id": e["task_id"],
        "status": e["status"],
        "trajectory": {"status": e["trajectory"].get("status", e["status"]), "metadata": {**e["trajectory"].get("metadata", {}), "trace_count": len(traces), **labels}, "traces": traces, "error": None},
        "timing": e.get("timing") or {},
        "node_id": e.get("node_id"),
        "error": e.get("error"),
        "metadata": {**labels, "sample_index": e["sample_index"], "reward": e["reward"], "attempt": e.get("attempt", 0)},
    }


def group_view(group: dict[str, Any]) -> dict[str, Any]:
    """A group as `GET /rollout/groups` lists it without `include=trajectories` (and as a task status's `group`)."""
    return {k: v for k, v in group.items() if k != "trajectories"}


def to_polar_task_view(task: dict[str, Any], group: dict[str, Any] | None, *, done: bool, cancelled: bool = False) -> dict[str, Any]:
    """`GET /rollout/task/{id}` of this server (reference-api.ts referenceTaskView): the reference TaskStatus
    `{task_id, status (lower-case), total_sessions, completed_sessions, results: [SessionResult], result_paths: []}`
    plus `polar_status`, `num_samples`, `created_at`, `updated_at`, `sessions`, `group`, `callback`, `error`. A
    finished task without a group is FAILED; a cancelled one has ERROR results with `metadata.polar_status`."""
    task_id = task["task_id"]
    n = int(task.get("num_samples", 1))
    metadata = task.get("metadata") or {}
    now = int(time.time() * 1000)
    if cancelled:
        word = "CANCELLED"
        results = [{"session_id": f"s{i}", "task_id": task_id, "status": "ERROR", "trajectory": {"status": "ERROR", "metadata": {"trace_count": 0}, "traces": [], "error": "cancelled: by request"},
                    "timing": {}, "node_id": "local", "error": "cancelled: by request", "metadata": {"sample_index": i, "reward": 0, "attempt": 0, "polar_status": "CANCELLED"}} for i in range(n)]
        sessions = [{"session_id": f"s{i}", "sample_index": i, "status": "CANCELLED", "node_id": "local", "attempt": 0, "reward": 0, "error": "cancelled: by request"} for i in range(n)]
        group = None
    elif not done:
        word = "RUNNING"
        results = []
        sessions = [{"session_id": f"s{i}", "sample_index": i, "status": "RUNNING", "node_id": "local", "attempt": 0, "reward": None, "error": None} for i in range(n)]
        group = None
    elif group is None:
        word = "FAILED"
        results = [{"session_id": f"s{i}", "task_id": task_id, "status": "ERROR", "trajectory": {"status": "ERROR", "metadata": {"trace_count": 0}, "traces": [], "error": "harness shell failed: exit 1"},
                    "timing": {}, "node_id": "local", "error": "harness shell failed: exit 1", "metadata": {"sample_index": i, "reward": 0, "attempt": 0}} for i in range(n)]
        sessions = [{"session_id": f"s{i}", "sample_index": i, "status": "ERROR", "node_id": "local", "attempt": 0, "reward": 0, "error": "harness shell failed: exit 1"} for i in range(n)]
    else:
        word = "COMPLETED"
        results = [to_session_result(t, metadata) for t in group["trajectories"]]
        sessions = [{"session_id": r["session_id"], "sample_index": r["metadata"]["sample_index"], "status": r["status"], "node_id": r["node_id"], "attempt": 0, "reward": r["metadata"]["reward"], "error": r["error"]} for r in results]
    return {
        "task_id": task_id,
        "status": word.lower(),
        "total_sessions": n,
        "completed_sessions": len(results),
        "results": results,
        "result_paths": [],
        "polar_status": word,
        "num_samples": n,
        "created_at": now,
        "updated_at": now,
        "sessions": sessions,
        "group": None if group is None else {k: v for k, v in group_view(group).items() if k != "grpo_std"},
        "callback": None if not task.get("callback_url") else {"state": "done" if done else "not-due", "attempts": 1 if done else 0, "last_error": None},
        "error": None if word != "FAILED" else "no session of the task is usable: harness shell failed: exit 1",
    }


class FakeRollout:
    """Routes: submit, task status, cancel, status, groups, trajectories, ack, admin fan-out."""

    def __init__(self, *, token: str | None = None, shape: str = "polar", polls_until_done: int = 2) -> None:
        self.token = token
        self.shape = shape
        self.polls_until_done = polls_until_done
        self.requests: list[dict[str, Any]] = []
        self.tasks: dict[str, dict[str, Any]] = {}
        self.polls: dict[str, int] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self.acked: set[str] = set()
        self.fail_pause = False
        self.on_done: Any = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _body(self) -> Any:
                n = int(self.headers.get("content-length") or 0)
                return json.loads(self.rfile.read(n).decode()) if n else None

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                url = urllib.parse.urlsplit(self.path)
                body = self._body() if method in ("POST", "DELETE") else None
                outer.requests.append({"method": method, "path": url.path, "query": urllib.parse.parse_qs(url.query), "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                if outer.token and self.headers.get("authorization") != f"Bearer {outer.token}":
                    return self._send(401, {"error": "missing or wrong control-plane token"})
                status, answer = outer.route(method, url.path, urllib.parse.parse_qs(url.query), body)
                self._send(status, answer)

            def do_GET(self) -> None:  # noqa: N802
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

            def do_DELETE(self) -> None:  # noqa: N802
                self._handle("DELETE")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self._handler = Handler
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=lambda: self.server.serve_forever(poll_interval=0.05), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "FakeRollout":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def go_down(self, seconds: float) -> threading.Thread:
        """Stop listening now (connections are refused, as while a rollout server restarts) and listen again on the same
        port, with the same state, after ``seconds``; returns the thread that brings it back."""
        port = self.server.server_address[1]
        self.server.shutdown()
        self.server.server_close()

        def back() -> None:
            time.sleep(seconds)
            self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler)
            self.server.serve_forever(poll_interval=0.05)

        thread = threading.Thread(target=back, daemon=True)
        thread.start()
        return thread

    def add_group(self, group: dict[str, Any]) -> None:
        self.groups[group["task_id"]] = group

    def evaluated(self, task_id: str) -> bool:
        """Whether the task's group exists yet: a group added with add_group for no submitted task always does; a
        submitted task's only once its status has shown it finished (as the server evaluates it at the end)."""
        if task_id not in self.groups:
            return False
        return task_id not in self.tasks or self.polls[task_id] >= self.polls_until_done

    def paths(self) -> list[str]:
        return [f"{r['method']} {r['path']}" for r in self.requests]

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        if method == "POST" and path == "/rollout/task/submit":
            if not isinstance(body, dict) or not body.get("task_id"):
                return 400, {"error": "invalid task request: task_id: Required"}
            task_id = body["task_id"]
            self.tasks[task_id] = body
            self.polls[task_id] = 0
            if task_id not in self.groups and self.groups:
                template = copy.deepcopy(next(iter(self.groups.values())))
                template["task_id"] = task_id
                template["group_id"] = str((body.get("metadata") or {}).get("group_id") or task_id)
                template["acked_at"] = None
                n = int(body.get("num_samples", 1))
                for key in ("trajectories", "sessions", "rewards", "grpo_advantages", "loo_advantages"):
                    template[key] = template[key][:n]
                for t in template["trajectories"]:
                    t["task_id"] = task_id
                self.groups[task_id] = template
            return 200, {"task_id": task_id, "status": "running", "sessions": body.get("num_samples", 1), "previous_run": None}
        if parts[:2] == ["rollout", "task"] and len(parts) == 3:
            task_id = urllib.parse.unquote(parts[2])
            if task_id not in self.tasks:
                return 404, {"error": "unknown task"}
            if method == "DELETE":
                self.tasks[task_id]["cancelled"] = True
                self.groups.pop(task_id, None)  # cancelled sessions never enter a group
                n = int(self.tasks[task_id].get("num_samples", 1))
                return 200, {**to_polar_task_view(self.tasks[task_id], None, done=True, cancelled=True), "cancelled": n}
            self.polls[task_id] += 1
            done = self.polls[task_id] >= self.polls_until_done or self.tasks[task_id].get("cancelled")
            group = self.groups.get(task_id)
            if done and self.on_done:
                self.on_done(task_id)
            if self.shape == "reference":
                if done and group:
                    return 200, to_reference_task_result(group)
                n = self.tasks[task_id].get("num_samples", 1)
                return 200, {"task_id": task_id, "status": "failed" if done else "running", "total_sessions": n, "completed_sessions": n if done else 0, "results": [], "result_paths": []}
            return 200, to_polar_task_view(self.tasks[task_id], group, done=bool(done), cancelled=bool(self.tasks[task_id].get("cancelled")))
        if path == "/rollout/status":
            return 200, {"tasks": {t: "running" for t in self.tasks}, "pipeline": {"pending_sessions": 0}, "nodes": {"nodes": []}, "task_counts": {"running": len(self.tasks)}, "sessions": {}, "groups_ready": len([t for t in self.groups if t not in self.acked])}
        if self.shape == "reference" and parts[:2] == ["rollout", "groups"]:
            return 404, {"detail": "Not Found"}  # the reference Polar has no trainer group endpoints
        if path == "/rollout/groups" and method == "GET":
            include = "trajectories" in query.get("include", [])
            out = []
            for g in self.groups.values():
                if g["task_id"] in self.acked or not self.evaluated(g["task_id"]):
                    continue
                out.append(dict(g) if include else group_view(g))
            return 200, {"groups": out}
        if parts[:2] == ["rollout", "groups"] and len(parts) == 4:
            task_id = urllib.parse.unquote(parts[2])
            if parts[3] == "trajectories":
                if not self.evaluated(task_id):
                    return 404, {"error": f"no evaluated group for task {task_id} (groups are keyed by task_id)"}
                return 200, {**self.groups[task_id], "acked_at": 1 if task_id in self.acked else None, "grpo_std": query.get("std", ["population"])[0]}
            if parts[3] == "ack":
                group = self.groups.get(task_id) if self.evaluated(task_id) else None
                fresh = group is not None and task_id not in self.acked
                if group is not None:
                    self.acked.add(task_id)
                return 200, {"task_id": task_id, "group_id": None if group is None else group.get("group_id", task_id), "acked": fresh}
        if parts[:3] == ["rollout", "admin", "inference"] or path == "/rollout/admin/policy_version":
            if path.endswith("/pause") and self.fail_pause:
                return 502, {"ok": False, "nodes": [{"node_id": "n1", "ok": False, "status": None, "error": "no answer within 1 s"}]}
            node_body = {"paused": path.endswith("/pause"), "drained_in_flight": 3} if path.endswith("/pause") else {"paused": False, "policy_version": (body or {}).get("policy_version")}
            return 200, {"ok": True, "nodes": [{"node_id": "n1", "url": "http://n1", "ok": True, "status": 200, "body": node_body}]}
        return 404, {"error": f"no route {method} {path}"}
