#!/usr/bin/env python3
"""A trainer-bridge-style client of the Python Polar's rollout API, run against `polar serve` by
test/compat/reference-client.test.ts.

Written the way the public bridges are (radixark/miles `miles/rollout/polar_rollout.py` + `polar_adapter.py`, the
ProRL-Agent-Server `src/slime_bridge`, TIGER-AI-Lab/ClawBench `src/clawbench/prorl/submit.py`): Python standard library
only, the reference's field names, the `x-polar-control-token` header from POLAR_CONTROL_PLANE_TOKEN, submit then poll
`GET /rollout/task/{id}` until completed/failed, a callback listener for the TaskResult, and traces converted into
training samples (tokens, loss mask, rollout logprobs, reward). Every response is checked field by field against the
constraints of the reference's pydantic models (src/polar/rollout/models.py, src/polar/trajectory/models.py) as this
file restates them; nothing here is copied from those projects.

Usage: reference_client.py ROLLOUT_URL AGENT_COMMAND
Prints one JSON summary line on stdout; exits 1 with the failed check on stderr.
"""

from __future__ import annotations

import http.server
import json
import math
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime

SESSION_STATUSES = {"REGISTERED", "INITIALIZING", "READY", "RUNNING", "POST_RUN", "BUILDING", "EVALUATING", "COMPLETED", "ERROR", "TIMEOUT"}
TRAJECTORY_STATUSES = {"COMPLETED", "TIMEOUT", "ERROR"}
TASK_STATUSES = {"running", "completed", "failed", "cancelling", "cancelled"}
# SessionTiming forbids unknown keys: every key a server sends must be one of these.
TIMING_FLOAT_KEYS = {
    "register_to_init_queue_ms", "rollout_dispatch_ms", "rollout_result_wait_ms", "rollout_pipeline_e2e_ms", "init_ms",
    "ready_queue_ms", "run_ms", "postrun_queue_ms", "postrun_ms", "container_start_ms", "eval_container_start_ms",
    "runtime_validation_ms", "eval_runtime_validation_ms", "prepare_ms", "eval_prepare_ms", "agent_setup_ms",
    "agent_exec_ms", "agent_postprocess_ms", "build_ms", "eval_ms", "postrun_exec_ms", "runtime_stop_ms", "e2e_ms",
    "runtime_exec_ms", "mini_swe_command_ms",
}
TIMING_INT_KEYS = {
    "runtime_exec_count", "runtime_exec_timeout_count", "runtime_exec_failure_count", "runtime_exec_exception_count",
    "runtime_exec_cancelled_count", "mini_swe_command_count", "mini_swe_command_timeout_count",
    "mini_swe_command_failure_count",
}
TIMING_MAP_KEYS = {
    "runtime_exec_ms_by_category", "runtime_exec_count_by_category", "mini_swe_command_ms_by_category",
    "mini_swe_command_count_by_category",
}
NODE_METRICS = ("init_queue_depth", "init_inflight", "ready_depth", "run_inflight", "postrun_queue_depth", "postrun_inflight")


class CheckFailed(Exception):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise CheckFailed(what)


def is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v: object) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(float(v))


# --------------------------------------------------------------------------------------------------- HTTP


class Client:
    def __init__(self, base_url: str) -> None:
        self.base = base_url.rstrip("/")
        token = os.environ.get("POLAR_CONTROL_PLANE_TOKEN", "").strip()
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["X-Polar-Control-Token"] = token

    def call(self, method: str, path: str, body: object | None = None, headers: dict[str, str] | None = None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers if headers is not None else self.headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read().decode() or "null")
        except urllib.error.HTTPError as error:
            text = error.read().decode()
            try:
                return error.code, json.loads(text)
            except ValueError:
                return error.code, text


class CallbackListener:
    """The trainer side of `callback_url`: stores each POSTed TaskResult by task_id."""

    def __init__(self) -> None:
        self.results: dict[str, dict] = {}
        self.event = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                length = int(self.headers.get("Content-Length") or 0)
                payload = json.loads(self.rfile.read(length).decode())
                outer.results[str(payload.get("task_id"))] = payload
                outer.event.set()
                body = b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except ConnectionError:
                    pass  # the server needs only the status line; it may close before reading the body

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, task_id: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while task_id not in self.results:
            if time.monotonic() > deadline:
                raise CheckFailed(f"no callback for {task_id} within {timeout}s")
            self.event.wait(0.2)
            self.event.clear()
        return self.results[task_id]


# --------------------------------------------------------------------------------------------------- model checks


def check_trace(t: dict, where: str) -> None:
    check(isinstance(t, dict), f"{where}: a trace is an object")
    for key in ("prompt_ids", "response_ids", "loss_mask"):
        check(isinstance(t.get(key, []), list) and all(is_int(x) for x in t.get(key, [])), f"{where}.{key}: list of int")
    check(all(x in (0, 1) for x in t.get("loss_mask", [])), f"{where}.loss_mask: values 0 or 1")
    if t.get("loss_mask"):
        check(len(t["loss_mask"]) == len(t["response_ids"]), f"{where}.loss_mask: length of response_ids")
    for key in ("prompt_messages", "response_messages"):
        check(isinstance(t.get(key, []), list) and all(isinstance(m, dict) for m in t.get(key, [])), f"{where}.{key}: list of objects")
    check(t.get("tools") is None or (isinstance(t["tools"], list) and all(isinstance(x, dict) for x in t["tools"])), f"{where}.tools: list of objects or null")
    check(t.get("finish_reason") is None or isinstance(t["finish_reason"], str), f"{where}.finish_reason: string or null, got {t.get('finish_reason')!r}")
    lp = t.get("response_logprobs")
    check(lp is None or (isinstance(lp, list) and all(is_num(x) for x in lp)), f"{where}.response_logprobs: list of float or null")
    if lp is not None:
        check(len(lp) == len(t["response_ids"]), f"{where}.response_logprobs: length of response_ids")
    check(t.get("reward") is None or is_num(t["reward"]), f"{where}.reward: finite number or null")
    check(isinstance(t.get("metadata", {}), dict), f"{where}.metadata: object")


def check_session_result(r: dict, where: str) -> None:
    check(isinstance(r, dict), f"{where}: a SessionResult is an object")
    check(isinstance(r.get("session_id"), str) and isinstance(r.get("task_id"), str), f"{where}: session_id and task_id are strings")
    check(r.get("status") in SESSION_STATUSES, f"{where}.status: a SessionStatus, got {r.get('status')!r}")
    traj = r.get("trajectory")
    check(isinstance(traj, dict), f"{where}.trajectory: object")
    check(traj.get("status") in TRAJECTORY_STATUSES, f"{where}.trajectory.status: COMPLETED/TIMEOUT/ERROR")
    check(isinstance(traj.get("metadata", {}), dict), f"{where}.trajectory.metadata: object")
    check(traj.get("error") is None or isinstance(traj["error"], str), f"{where}.trajectory.error: string or null")
    check(isinstance(traj.get("traces", []), list), f"{where}.trajectory.traces: list")
    for i, t in enumerate(traj.get("traces", [])):
        check_trace(t, f"{where}.trajectory.traces[{i}]")
    timing = r.get("timing", {})
    check(isinstance(timing, dict), f"{where}.timing: object")
    for key, value in timing.items():
        if key in TIMING_FLOAT_KEYS:
            check(is_num(value), f"{where}.timing.{key}: number")
        elif key in TIMING_INT_KEYS:
            check(is_int(value), f"{where}.timing.{key}: int")
        elif key in TIMING_MAP_KEYS:
            check(isinstance(value, dict), f"{where}.timing.{key}: object")
        else:
            raise CheckFailed(f"{where}.timing.{key}: not a SessionTiming field (the model forbids extra keys)")
    check(r.get("node_id") is None or isinstance(r["node_id"], str), f"{where}.node_id: string or null")
    check(r.get("error") is None or isinstance(r["error"], str), f"{where}.error: string or null")
    check(isinstance(r.get("metadata", {}), dict), f"{where}.metadata: object")


def check_task_status(s: object, where: str) -> dict:
    check(isinstance(s, dict), f"{where}: TaskStatus is an object, got {s!r}")
    assert isinstance(s, dict)
    check(isinstance(s.get("task_id"), str), f"{where}.task_id: string")
    check(s.get("status") in TASK_STATUSES, f"{where}.status: one of {sorted(TASK_STATUSES)}, got {s.get('status')!r}")
    check(is_int(s.get("total_sessions")) and is_int(s.get("completed_sessions")), f"{where}: total_sessions and completed_sessions are ints")
    check(isinstance(s.get("results", []), list), f"{where}.results: list, got {type(s.get('results')).__name__}")
    check(isinstance(s.get("result_paths", []), list) and all(isinstance(p, str) for p in s.get("result_paths", [])), f"{where}.result_paths: list of strings")
    for i, r in enumerate(s.get("results", [])):
        check_session_result(r, f"{where}.results[{i}]")
    return s


def check_node_info(n: dict, where: str) -> None:
    check(isinstance(n.get("node_id"), str) and isinstance(n.get("gateway_url"), str), f"{where}: node_id and gateway_url are strings")
    for key in ("max_init_workers", "max_run_workers", "max_postrun_workers", "heartbeat_interval_seconds"):
        check(is_int(n.get(key)), f"{where}.{key}: int")
    check(isinstance(n.get("healthy"), bool) and isinstance(n.get("draining", False), bool), f"{where}: healthy/draining are booleans")
    metrics = n.get("metrics", {})
    check(all(is_int(metrics.get(k, 0)) and metrics.get(k, 0) >= 0 for k in NODE_METRICS), f"{where}.metrics: NodeStageMetrics")
    check(is_int(n.get("dispatch_reservations", 0)), f"{where}.dispatch_reservations: int")
    try:
        datetime.fromisoformat(str(n.get("last_heartbeat")).replace("Z", "+00:00"))
    except ValueError as error:
        raise CheckFailed(f"{where}.last_heartbeat: ISO 8601 datetime ({error})") from error


# --------------------------------------------------------------------------------------------------- trainer side


def session_result_to_samples(result: dict, group_index: int) -> list[dict]:
    """One sample per trace, as the Miles adapter builds them: tokens, loss mask, rollout logprobs, reward."""
    samples = []
    for trace_index, trace in enumerate(result["trajectory"]["traces"]):
        prompt_ids, response_ids = list(trace["prompt_ids"]), list(trace["response_ids"])
        if not prompt_ids or not response_ids:
            continue
        loss_mask = [1 if int(v) else 0 for v in trace["loss_mask"]]
        check(len(loss_mask) == len(response_ids), f"{result['session_id']} trace {trace_index}: loss_mask length")
        logprobs = trace.get("response_logprobs") or []
        if any(loss_mask):
            check(len(logprobs) == len(response_ids), f"{result['session_id']} trace {trace_index}: rollout logprobs for trainable tokens")
        check(all(lp <= 0 for lp, m in zip(logprobs, loss_mask) if m), f"{result['session_id']} trace {trace_index}: logprobs <= 0")
        status = "COMPLETED"
        if result["trajectory"]["status"] == "TIMEOUT" or result["status"] == "TIMEOUT":
            status = "ABORTED"
        elif result["status"] == "ERROR" or result.get("error"):
            status = "FAILED"
        elif trace.get("finish_reason") == "length":
            status = "TRUNCATED"
        scheduler = {}
        for source in (result.get("metadata"), result["trajectory"].get("metadata"), trace.get("metadata")):
            for key in ("group_id", "policy_version", "rollout_step"):
                if isinstance(source, dict) and key in source:
                    scheduler[key] = source[key]
        text = "\n\n".join(
            f"[{m.get('role', 'assistant')}] {m['content'] if isinstance(m.get('content'), str) else ''}".strip()
            for m in trace.get("response_messages", [])
        )
        for m in trace.get("prompt_messages", []) + trace.get("response_messages", []):
            check(isinstance(m.get("role"), str), "messages carry an OpenAI role")
            for call in m.get("tool_calls") or []:
                check(call.get("type") == "function" and isinstance(call.get("function", {}).get("name"), str), "tool_calls are OpenAI function calls")
        samples.append({
            "group_index": group_index,
            "tokens": prompt_ids + response_ids,
            "response_length": len(response_ids),
            "loss_mask": loss_mask,
            "rollout_log_probs": [float(x) for x in logprobs] or [0.0] * len(response_ids),
            "reward": {"score": float(trace["reward"]) if trace.get("reward") is not None else 0.0},
            "status": status,
            "response": text,
            "scheduler": scheduler,
        })
    return samples


def poll(client: Client, task_id: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status_code, body = client.call("GET", f"/rollout/task/{task_id}")
        check(status_code == 200, f"GET /rollout/task/{task_id}: HTTP {status_code} {body}")
        status = check_task_status(body, f"task {task_id}")
        if status["status"] in ("completed", "failed"):
            return status
        check(time.monotonic() < deadline, f"task {task_id} still {status['status']} after {timeout}s")
        time.sleep(0.3)


def main() -> int:
    base_url, agent_command = sys.argv[1], sys.argv[2]
    client = Client(base_url)
    listener = CallbackListener()
    summary: dict[str, object] = {}

    code, health = client.call("GET", "/health")
    check(code == 200 and isinstance(health, dict) and health.get("status") == "ok" and is_int(health.get("nodes")), f"GET /health: {code} {health}")
    summary["health_nodes"] = health["nodes"]

    # A pydantic model_dump() of a full reference TaskRequest: every default present, integer scheduler labels.
    full = {
        "task_id": "compat-full", "instruction": "Create out.txt containing ok.", "num_samples": 3,
        "dispatch_priority": 0, "early_stop_min_usable_sessions": None, "timeout_seconds": 120.0, "runtime": None,
        "agent": {
            "harness": "shell", "import_path": None, "model_name": "polar-sim", "settings": {}, "env": {"COMPAT": "1"},
            "mcp_servers": [], "skills_path": None, "custom_shell": {"command": agent_command, "cwd": None, "env": None},
        },
        "builder": {"strategy": "prefix_merging", "config": {}},
        "evaluator": {"strategy": "test_on_output", "config": {"command": "grep -q ok out.txt"}, "env": {}, "refresh_runtime": False},
        "callback_url": listener.url,
        "metadata": {"group_id": 7, "policy_version": 3, "rollout_step": 5},
    }
    # The least a reference client may send: everything else defaults (num_samples 1, timeout 600, per_request).
    minimal = {"task_id": "compat-minimal", "instruction": "Create out.txt containing ok.", "agent": {"harness": "shell", "custom_shell": {"command": agent_command}}}

    for task in (full, minimal):
        code, body = client.call("POST", "/rollout/task/submit", task)
        check(code == 200 and isinstance(body, dict) and body.get("task_id") == task["task_id"] and body.get("status") == "running", f"submit {task['task_id']}: {code} {body}")

    # Fields the server cannot honour, and unknown keys, are 400s that name them.
    code, body = client.call("POST", "/rollout/task/submit", {**minimal, "task_id": "compat-import", "agent": {"import_path": "my_pkg.agent:Agent"}})
    check(code == 400 and "agent.import_path" in json.dumps(body), f"import_path: expected 400 naming agent.import_path, got {code} {body}")
    code, body = client.call("POST", "/rollout/task/submit", {**minimal, "task_id": "compat-unknown", "frobnicate": True})
    check(code == 400 and "frobnicate" in json.dumps(body), f"unknown key: expected 400 naming it, got {code} {body}")

    # A cancel that wins the race against its submit leaves a tombstone: the late submit is refused.
    code, body = client.call("DELETE", "/rollout/task/compat-ghost?register_if_missing=true")
    ghost = check_task_status(body, "DELETE compat-ghost")
    check(code == 200 and ghost["status"] == "cancelled" and ghost["total_sessions"] == 0, f"tombstone: {code} {body}")
    code, body = client.call("POST", "/rollout/task/submit", {**minimal, "task_id": "compat-ghost"})
    check(code == 409, f"submit after a tombstone: expected 409, got {code} {body}")
    code, body = client.call("DELETE", "/rollout/task/compat-nowhere")
    check(code == 404, f"DELETE of an unknown task without register_if_missing: expected 404, got {code} {body}")

    done = poll(client, "compat-full", 90)
    check(done["status"] == "completed" and done["total_sessions"] == 3 and done["completed_sessions"] == 3 and len(done["results"]) == 3, f"compat-full: {done['status']} {done['completed_sessions']}/{done['total_sessions']}")
    callback = listener.wait_for("compat-full", 30)
    check(callback.get("status") == "completed" and isinstance(callback.get("results"), list) and isinstance(callback.get("result_paths", []), list), f"TaskResult callback: {str(callback)[:300]}")
    for i, r in enumerate(callback["results"]):
        check_session_result(r, f"callback.results[{i}]")
    check(sorted(r["session_id"] for r in callback["results"]) == sorted(r["session_id"] for r in done["results"]), "the callback carries the same sessions as the status")

    samples = []
    for r in done["results"]:
        samples.extend(session_result_to_samples(r, group_index=7))
    check(len(samples) > 0, "compat-full produced training samples")
    trainable = sum(sum(s["loss_mask"]) for s in samples)
    check(trainable > 0, "samples have trainable tokens")
    check(all(s["scheduler"] == {"group_id": "7", "policy_version": "3", "rollout_step": 5} for s in samples), f"scheduler labels read back: {samples[0]['scheduler']}")
    rewards = sorted({s["reward"]["score"] for s in samples})
    finish = sorted({t.get("finish_reason") for r in done["results"] for t in r["trajectory"]["traces"]}, key=str)
    summary.update({"full_sessions": len(done["results"]), "samples": len(samples), "trainable_tokens": trainable, "rewards": rewards, "finish_reasons": finish,
                    "session_statuses": sorted(r["status"] for r in done["results"])})

    small = poll(client, "compat-minimal", 90)
    check(small["total_sessions"] == 1 and len(small["results"]) == 1, f"compat-minimal defaults to one sample: {small['total_sessions']}")
    summary["minimal_status"] = small["status"]

    code, status = client.call("GET", "/rollout/status")
    check(code == 200 and isinstance(status, dict), f"GET /rollout/status: {code}")
    check(isinstance(status.get("tasks"), dict) and status["tasks"].get("compat-full") == "completed", f"/rollout/status tasks: {status.get('tasks')}")
    check(is_int((status.get("pipeline") or {}).get("pending_sessions")), "/rollout/status pipeline.pending_sessions")
    nodes = (status.get("nodes") or {}).get("nodes")
    check(isinstance(nodes, list) and len(nodes) >= 1, "/rollout/status nodes.nodes: list")
    for i, n in enumerate(nodes):
        check_node_info(n, f"/rollout/status nodes.nodes[{i}]")

    code, listed = client.call("GET", "/nodes")
    check(code == 200 and isinstance(listed, list) and len(listed) >= 1, f"GET /nodes is a list: {code} {str(listed)[:200]}")
    for i, n in enumerate(listed):
        check_node_info(n, f"/nodes[{i}]")
    code, one = client.call("GET", f"/nodes/{listed[0]['node_id']}")
    check(code == 200 and isinstance(one, dict) and one.get("node_id") == listed[0]["node_id"], f"GET /nodes/{{id}}: {code}")
    check_node_info(one, "/nodes/{id}")
    code, _ = client.call("GET", "/nodes/no-such-node")
    check(code == 404, f"GET /nodes/no-such-node: expected 404, got {code}")
    summary["nodes"] = [n["node_id"] for n in listed]

    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CheckFailed as failure:
        print(f"reference_client: FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
