"""A stand-in rollout server for the client tests (http.server in a thread), serving recorded group payloads.

It keeps every request it got (method, path, query, headers, body) so tests can check what the client sent, and can
answer in Polar's task-status shape or the reference's (``shape="reference"``)."""

from __future__ import annotations

import copy
import json
import os
import threading
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
        t["metadata"] = {}
        results.append(t)
    return {"task_id": group["task_id"], "status": "completed", "total_sessions": len(results), "completed_sessions": len(results), "results": results, "result_paths": []}


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

    def add_group(self, group: dict[str, Any]) -> None:
        self.groups[group["task_id"]] = group

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
                n = int(body.get("num_samples", 1))
                for key in ("trajectories", "sessions", "rewards", "grpo_advantages", "loo_advantages"):
                    template[key] = template[key][:n]
                for t in template["trajectories"]:
                    t["task_id"] = task_id
                self.groups[task_id] = template
            return 200, {"task_id": task_id, "status": "RUNNING", "sessions": body.get("num_samples", 1)}
        if parts[:2] == ["rollout", "task"] and len(parts) == 3:
            task_id = urllib.parse.unquote(parts[2])
            if task_id not in self.tasks:
                return 404, {"error": "unknown task"}
            if method == "DELETE":
                self.tasks[task_id]["cancelled"] = True
                return 200, {"task_id": task_id, "status": "CANCELLED", "cancelled": 1}
            self.polls[task_id] += 1
            done = self.polls[task_id] >= self.polls_until_done or self.tasks[task_id].get("cancelled")
            group = self.groups.get(task_id)
            if done and self.on_done:
                self.on_done(task_id)
            if self.shape == "reference":
                if done and group:
                    return 200, to_reference_task_result(group)
                return 200, {"task_id": task_id, "status": "running", "total_sessions": self.tasks[task_id].get("num_samples", 1), "completed_sessions": 0, "results": [], "result_paths": []}
            n = self.tasks[task_id].get("num_samples", 1)
            status = "CANCELLED" if self.tasks[task_id].get("cancelled") else ("COMPLETED" if done else "RUNNING")
            sessions = [{"session_id": f"s{i}", "sample_index": i, "status": "COMPLETED" if done else "RUNNING", "reward": None} for i in range(n)]
            return 200, {"task_id": task_id, "status": status, "num_samples": n, "sessions": sessions, "results": n if done else 0, "group": None}
        if path == "/rollout/status":
            return 200, {"tasks": {"RUNNING": len(self.tasks)}, "sessions": {}, "nodes": [], "groups_ready": len(self.groups)}
        if path == "/rollout/groups" and method == "GET":
            include = "trajectories" in query.get("include", [])
            out = []
            for g in self.groups.values():
                if g["task_id"] in self.acked:
                    continue
                g2 = dict(g)
                if not include:
                    g2.pop("trajectories", None)
                out.append(g2)
            return 200, {"groups": out}
        if parts[:2] == ["rollout", "groups"] and len(parts) == 4:
            task_id = urllib.parse.unquote(parts[2])
            if parts[3] == "trajectories":
                return (200, self.groups[task_id]) if task_id in self.groups else (404, {"error": f"no evaluated group for task {task_id}"})
            if parts[3] == "ack":
                fresh = task_id in self.groups and task_id not in self.acked
                self.acked.add(task_id)
                return 200, {"task_id": task_id, "group_id": task_id, "acked": fresh}
        if parts[:3] == ["rollout", "admin", "inference"] or path == "/rollout/admin/policy_version":
            if path.endswith("/pause") and self.fail_pause:
                return 502, {"ok": False, "nodes": [{"node_id": "n1", "ok": False, "status": None, "error": "no answer within 1 s"}]}
            node_body = {"paused": path.endswith("/pause"), "drained_in_flight": 3} if path.endswith("/pause") else {"paused": False, "policy_version": (body or {}).get("policy_version")}
            return 200, {"ok": True, "nodes": [{"node_id": "n1", "url": "http://n1", "ok": True, "status": 200, "body": node_body}]}
        return 404, {"error": f"no route {method} {path}"}
