"""Shared by the bridges: run one TaskRequest through Polar and return its samples (blocking; call it in a thread
from async code)."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any, Mapping

from ..client import PolarClient, PolarError
from ..samples import Sample, to_samples

__all__ = ["client_from_env", "task_request", "run_task"]


def client_from_env(url: str | None = None, token: str | None = None) -> PolarClient:
    """A client for ``url`` (else ``$POLAR_URL``) with ``token`` (else ``$POLAR_CONTROL_TOKEN``).

    :raises PolarError: when no URL is given either way.
    """
    url = url or os.environ.get("POLAR_URL")
    if not url:
        raise PolarError("no rollout server URL: pass one or set POLAR_URL")
    return PolarClient(url, token or os.environ.get("POLAR_CONTROL_TOKEN"))


def task_request(template: Mapping[str, Any] | None, *, instruction: str | None = None, task: Mapping[str, Any] | None = None,
                 num_samples: int = 1, task_id: str | None = None, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A TaskRequest: ``task`` as given (a full TaskRequest from the dataset row), else ``template`` (agent, runtime,
    evaluator, …; a dict or ``$POLAR_TASK_TEMPLATE`` JSON file) with ``instruction``. A fresh ``task_id`` unless one
    is given; ``num_samples`` and ``metadata`` are merged in.

    :raises ValueError: when neither a task nor an instruction is given.
    """
    if task is not None:
        out = dict(task)
    else:
        if instruction is None:
            raise ValueError("a TaskRequest needs `task` or `instruction`")
        if template is None and os.environ.get("POLAR_TASK_TEMPLATE"):
            with open(os.environ["POLAR_TASK_TEMPLATE"], encoding="utf8") as fh:
                template = json.load(fh)
        out = {**dict(template or {}), "instruction": instruction}
    out["task_id"] = task_id or f"{out.get('task_id', 'task')}-{uuid.uuid4().hex[:12]}"
    out["num_samples"] = num_samples
    if metadata:
        out["metadata"] = {**dict(out.get("metadata") or {}), **dict(metadata)}
    return out


def run_task(client: PolarClient, task: Mapping[str, Any], *, timeout: float | None = None, ack: bool = True) -> list[Sample]:
    """Submit, wait, fetch the group's token data, acknowledge; the samples (empty when no session was usable).

    Against this repository's server (its task status has ``polar_status`` / ``group``) the samples always come from
    ``GET /rollout/groups/{task_id}/trajectories`` (the server's rewards and advantages), and the group is then
    acknowledged when ``ack`` is true, so it leaves ``GET /rollout/groups?ready=1`` and a trainer that also pulls ready
    groups does not train on it twice. Only the reference Polar, which has no group endpoints, is read from the
    ``results`` of its task status (advantages computed here).

    :raises PolarTimeout: past ``timeout``. :raises PolarError: when the server refuses the task.
    """
    client.submit(task)
    task_id = str(task["task_id"])
    status = client.wait(task_id, timeout=timeout)
    if not status.from_polar and status.results:  # the reference server: its SessionResults are all there is
        return to_samples(status.raw)
    try:
        group = client.group(task_id)
    except PolarError as err:
        if err.status == 404:  # no usable session: no group (a failed or cancelled task)
            return []
        raise
    if ack:
        client.ack(task_id)
    return to_samples(group)
