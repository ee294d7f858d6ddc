#!/usr/bin/env python3
"""A GRPO trainer for the simulator's variant policy, through the whole Polar stack.

Started by ``polar train-demo`` (which runs the rollout server, a gateway with a real harness CLI and the simulator,
and hands this script their URLs and the bundled tasks as TaskRequests); it can also be pointed at any
``polar serve --with-sim`` by hand. Stdlib + ``polar_client`` only.

The "model" being trained is the simulator's categorical policy over each task's behaviour variants (solve /
wrong_fix / give_up …; see src/sim/variant-policy.ts): one logit per variant, per task. Every step:

1. submit each task with ``num_samples = G`` (a new task_id per step, ``metadata.sim_script.policy`` = the task's
   name so all steps share its logits);
2. wait, pull the evaluated groups with token data (``to_samples``), drop groups sampled more than K versions behind
   (``filter_stale``);
3. policy gradient: for each session, the sampled variant v (the simulator reports its draw, ``POST
   /sim/policy/choices``; its log-probability is also inside the first sampled token's logprob) and the session's
   GRPO advantage A give ∂/∂logit_k = A · (1[k = v] − π(k)); averaged per group, times a truncated importance ratio
   π_now(v)/π_sampled(v) ≤ 2 for off-policy groups; logits += lr · gradient;
4. ``weight_sync``: pause every gateway, drain, load the new logits into the simulator (``POST /update_weights``,
   which bumps its weight version), stamp the same policy_version on every gateway, resume.

``--async`` keeps K steps of sampling in flight while training (submits step s+K before training on step s), so
groups are up to K versions stale. Writes one JSON row per step to ``--out``/steps.jsonl and prints a table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import urllib.request
from collections import deque
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

from polar_client import PolarClient, PolarError, filter_stale, to_samples, weight_sync  # noqa: E402


def sim_call(sim_url: str, path: str, body: Any = None) -> Any:
    """A JSON call to the simulator (GET without a body, POST with one)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(sim_url.rstrip("/") + path, data=data, method="GET" if data is None else "POST", headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read().decode())


def softmax(logits: dict[str, float]) -> dict[str, float]:
    top = max(logits.values())
    exps = {k: math.exp(v - top) for k, v in logits.items()}
    total = sum(exps.values())
    return {k: e / total for k, e in exps.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True, help="rollout server URL")
    ap.add_argument("--sim", required=True, help="simulator URL")
    ap.add_argument("--token", default=os.environ.get("POLAR_CONTROL_TOKEN"))
    ap.add_argument("--tasks", required=True, help="JSON file: a list of TaskRequests (num_samples is overridden)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--samples", type=int, default=8, help="G: sessions per task per step")
    ap.add_argument("--lr", type=float, default=1.5)
    ap.add_argument("--async", dest="async_mode", action="store_true", help="keep sampling while training")
    ap.add_argument("--max-staleness", type=int, default=1, help="K: drop groups sampled more than K versions behind")
    ap.add_argument("--task-timeout", type=float, default=900.0, help="seconds to wait for one step's tasks")
    ap.add_argument("--out", required=True, help="directory for steps.jsonl and used-sessions.json")
    ap.add_argument("--run-id", default=str(int(time.time())), help="suffix that keeps this run's task ids unique")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    client = PolarClient(args.server, args.token)
    with open(args.tasks, encoding="utf8") as fh:
        base_tasks: list[dict[str, Any]] = json.load(fh)

    # Initial policy: the scripts' own weights (log w), so step 1 samples as the plain simulator would.
    logits: dict[str, dict[str, float]] = {}
    for task in base_tasks:
        variants = task["metadata"]["sim_script"]["variants"]
        logits[task["task_id"]] = {name: (math.log(v["weight"]) if v["weight"] > 0 else -20.0) for name, v in variants.items()}
    version = 0
    sim_call(args.sim, "/update_weights", {"policy": logits, "weight_version": str(version)})
    client.set_policy_version(version)

    def submit(step: int) -> list[str]:
        ids = []
        for base in base_tasks:
            task = json.loads(json.dumps(base))
            name = base["task_id"]
            task["task_id"] = f"{name}@{args.run_id}-s{step}"
            task["num_samples"] = args.samples
            task["metadata"]["sim_script"]["policy"] = name
            task["metadata"].update({"group_id": name, "rollout_step": step, "policy_version": str(version)})
            client.submit(task)
            ids.append(task["task_id"])
        return ids

    depth = args.max_staleness if args.async_mode else 0
    pending: deque[tuple[int, list[str]]] = deque()
    next_submit = 1
    while next_submit <= min(args.steps, 1 + depth):
        pending.append((next_submit, submit(next_submit)))
        next_submit += 1

    steps_path = os.path.join(args.out, "steps.jsonl")
    used_sessions: list[dict[str, str]] = []
    header = f"{'step':>4} {'policy_version':>14} {'pass@1':>7} {'mean reward':>11} {'groups used':>11} {'stale dropped':>13} {'wall s':>7}"
    print(header, flush=True)
    with open(steps_path, "w", encoding="utf8") as steps_out:
        for step in range(1, args.steps + 1):
            started = time.monotonic()
            submitted_step, task_ids = pending.popleft()
            assert submitted_step == step
            client.wait_all(task_ids, timeout=args.task_timeout)
            groups = [g for g in (_group_or_none(client, tid) for tid in task_ids) if g is not None]
            sampled_versions = sorted({v for g in groups for v in (g.get("policy_versions") or [])}, key=lambda v: int(v))
            # Every session submitted counts for pass@1: an errored session is a failure, not left out.
            rewards_all = [float(s["reward"]) for g in groups for s in g["sessions"]]
            n_sessions = len(task_ids) * args.samples
            passed = sum(1 for r in rewards_all if r >= 1.0)
            kept = filter_stale(groups, version, args.max_staleness)

            # Policy gradient on the variant choice, one term per session, averaged per group.
            session_ids = [s["session_id"] for g in kept.kept for s in g["sessions"]]
            choices = sim_call(args.sim, "/sim/policy/choices", {"session_ids": session_ids})["choices"] if session_ids else {}
            grads: dict[str, dict[str, float]] = {k: {v: 0.0 for v in table} for k, table in logits.items()}
            for group, weight in zip(kept.kept, kept.weights):
                samples = [s for s in to_samples(group) if s.trace_index == 0]
                if not samples:
                    continue
                for s in samples:
                    choice = choices.get(s.session_id)
                    if not choice:
                        continue
                    key, variant = choice["policy"], choice["variant"]
                    probs = softmax(logits[key])
                    ratio = min(2.0, math.exp(math.log(max(probs[variant], 1e-300)) - choice["logprob"]))
                    for k in grads[key]:
                        grads[key][k] += weight * ratio * s.advantage * ((1.0 if k == variant else 0.0) - probs[k]) / len(samples)
                    used_sessions.append({"session_id": s.session_id, "task_id": s.task_id})
            for key, table in grads.items():
                for k, g in table.items():
                    logits[key][k] += args.lr * g

            # In async mode the next steps' sampling is already running; submit to keep `depth` steps in flight.
            if next_submit <= args.steps:
                pending.append((next_submit, submit(next_submit)))
                next_submit += 1

            new_version = version + 1
            with weight_sync(client, new_version) as sync:
                sim_call(args.sim, "/update_weights", {"policy": logits, "weight_version": str(new_version)})
            version = new_version
            for tid in task_ids:
                client.ack(tid)

            row = {
                "step": step,
                "mode": "async" if args.async_mode else "sync",
                "policy_version": sampled_versions[0] if len(sampled_versions) == 1 else sampled_versions,
                "pass_at_1": passed / n_sessions if n_sessions else 0.0,
                "mean_reward": sum(rewards_all) / n_sessions if n_sessions else 0.0,
                "sessions": n_sessions,
                "groups_used": len(kept.kept),
                "stale_groups_dropped": len(kept.dropped),
                "max_staleness": args.max_staleness,
                "drained_in_flight": sync.drained_in_flight,
                "new_policy_version": str(version),
                "p_solve": {k: round(softmax(t).get("solve", 0.0), 4) for k, t in logits.items()},
                "wall_s": round(time.monotonic() - started, 2),
            }
            steps_out.write(json.dumps(row) + "\n")
            steps_out.flush()
            pv = row["policy_version"] if isinstance(row["policy_version"], str) else ",".join(row["policy_version"])
            print(f"{step:>4} {pv:>14} {row['pass_at_1']:>7.3f} {row['mean_reward']:>11.3f} {row['groups_used']:>11} {row['stale_groups_dropped']:>13} {row['wall_s']:>7.1f}", flush=True)

    with open(os.path.join(args.out, "used-sessions.json"), "w", encoding="utf8") as fh:
        json.dump(used_sessions, fh)
    with open(os.path.join(args.out, "logits.json"), "w", encoding="utf8") as fh:
        json.dump({"policy_version": str(version), "logits": logits}, fh, indent=1)
    return 0


def _group_or_none(client: PolarClient, task_id: str) -> dict[str, Any] | None:
    """The task's evaluated group with token data, or None when it has none (every session failed)."""
    try:
        return client.group(task_id)
    except PolarError as err:
        if err.status == 404:
            return None
        raise


if __name__ == "__main__":
    sys.exit(main())
