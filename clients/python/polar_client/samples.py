"""Evaluated groups → training samples (one per trace), with GRPO and leave-one-out advantages.

A *group* is the usable sessions of one task (Polar: ``GET /rollout/groups/{task_id}/trajectories`` or a
``?include=trajectories`` entry; reference Polar: a ``TaskResult``/``TaskStatus`` with ``results: [SessionResult]``).
A session's trajectory holds one or more *traces* (a prefix-merged chain each: a harness that forks a sub-agent or
compacts its context makes several). Rewards and advantages are **per session** (the evaluator grades the outcome of
the whole session) and are **broadcast** to every trace of the session: each trace becomes one :class:`Sample` with
the session's ``reward``, ``advantage`` and ``loo_advantage`` (``trace_reward`` keeps the trace's own reward, which
differs only when the evaluator gave per-trace rewards). So a session with k traces contributes k samples;
``weight`` is 1, or 1/k with ``per_session_weight=True`` so every session counts once in a mean-over-samples loss.

Advantages: GRPO (r − mean) / (std + eps) with the population std (``std="unbiased"`` for verl/TRL), Shao et al. 2024
(arXiv 2402.03300) §4.1.2; leave-one-out r_i − mean(r_j, j ≠ i), Ahmadian et al. 2024 (arXiv 2402.14740) §3. Polar
groups carry both, computed by the server; reference groups get them computed here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

__all__ = ["Sample", "to_samples", "grpo_advantages", "loo_advantages", "session_reward", "version_number"]

#: Session statuses whose traces may be trained on (a TIMEOUT keeps its partial trajectory).
USABLE_STATUSES = frozenset({"COMPLETED", "TIMEOUT"})


@dataclass
class Sample:
    """One trace, ready for a policy-gradient loss.

    ``response_ids``, ``loss_mask`` (1 = sampled by the policy, 0 = template/tool tokens) and ``rollout_logprobs``
    (natural log; 0.0 on mask-0 positions; None when the engine gave none) have one entry per response token.
    """

    task_id: str
    group_id: str
    session_id: str
    sample_index: int
    trace_index: int
    num_traces: int
    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    rollout_logprobs: list[float] | None
    reward: float
    trace_reward: float | None
    advantage: float
    loo_advantage: float
    policy_versions: list[str | None]
    finish_reason: str | None
    status: str
    weight: float = 1.0
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens(self) -> list[int]:
        """``prompt_ids + response_ids`` (slime's ``Sample.tokens``)."""
        return self.prompt_ids + self.response_ids

    @property
    def policy_version(self) -> str | None:
        """The oldest version any token of this trace was sampled under (numeric order when numeric), or None."""
        known = [v for v in self.policy_versions if v is not None]
        if not known:
            return None
        return min(known, key=lambda v: (version_number(v) is None, version_number(v) or 0, v))


def version_number(version: str | int | None) -> int | None:
    """A policy version as an integer (``"7"`` → 7), or None when it is not one."""
    if version is None:
        return None
    try:
        return int(str(version))
    except ValueError:
        return None


def grpo_advantages(rewards: Sequence[float], *, eps: float = 1e-6, std: str = "population") -> list[float]:
    """(r − mean) / (std + eps) per reward; ``std`` is ``"population"`` (default, as Polar) or ``"unbiased"``.

    :raises ValueError: on a non-finite reward or an unknown ``std``.
    """
    if std not in ("population", "unbiased"):
        raise ValueError(f"std must be 'population' or 'unbiased', got {std!r}")
    _check(rewards)
    n = len(rewards)
    if n == 0:
        return []
    mean = sum(rewards) / n
    sq = sum((r - mean) ** 2 for r in rewards)
    divisor = n - 1 if std == "unbiased" else n
    sigma = math.sqrt(sq / divisor) if divisor > 0 else 0.0
    return [(r - mean) / (sigma + eps) for r in rewards]


def loo_advantages(rewards: Sequence[float]) -> list[float]:
    """r_i − mean of the other rewards; 0 for a group of one. :raises ValueError: on a non-finite reward."""
    _check(rewards)
    n = len(rewards)
    if n <= 1:
        return [0.0] * n
    total = sum(rewards)
    return [r - (total - r) / (n - 1) for r in rewards]


def _check(rewards: Sequence[float]) -> None:
    for i, r in enumerate(rewards):
        if not isinstance(r, (int, float)) or not math.isfinite(r):
            raise ValueError(f"rewards[{i}] must be a finite number, got {r!r}")


def session_reward(result: Mapping[str, Any]) -> float | None:
    """A SessionResult's reward: ``reward`` (Polar group views), else the evaluation's ``outcome_reward`` (Polar) or
    ``reward`` (reference), else the last trace's reward; None when there is none."""
    if isinstance(result.get("reward"), (int, float)):
        return float(result["reward"])
    trajectory = result.get("trajectory") or {}
    evaluation = (trajectory.get("metadata") or {}).get("evaluation") or {}
    for key in ("outcome_reward", "reward"):
        if isinstance(evaluation.get(key), (int, float)):
            return float(evaluation[key])
    traces = trajectory.get("traces") or []
    if traces and isinstance(traces[-1].get("reward"), (int, float)):
        return float(traces[-1]["reward"])
    return None


def _finish(value: Any) -> str | None:
    """``finish_reason``: Polar's ``{unified, raw}`` or the reference's string."""
    if isinstance(value, Mapping):
        unified = value.get("unified")
        return None if unified is None else str(unified)
    return None if value is None else str(value)


def _sample_index(result: Mapping[str, Any], position: int) -> int:
    """A SessionResult's sample index: ``metadata.sample_index`` (both servers fill it), else a top-level
    ``sample_index``, else its position in the task's results (which are in sample order)."""
    for value in ((result.get("metadata") or {}).get("sample_index"), result.get("sample_index")):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return position


def _group_id(result: Mapping[str, Any], default: str) -> str:
    """A session's group label: its SessionResult's ``metadata.group_id`` (the task's ``metadata.group_id``, which the
    server copies there), else ``default`` (the group's label, else the task_id)."""
    value = (result.get("metadata") or {}).get("group_id")
    return default if value is None or value == "" else str(value)


def to_samples(group: Mapping[str, Any], *, std: str = "population", eps: float = 1e-6, per_session_weight: bool = False) -> list[Sample]:
    """Samples of one group, one per trace, in sample order then trace order.

    :param group: a Polar group with ``trajectories`` (``GET /rollout/groups/{task_id}/trajectories``), or a
        ``TaskResult``/``TaskStatus`` with ``results: [SessionResult]`` (the reference's, or Polar's, whose
        advantages are then computed here: prefer the group endpoint). ``group_id`` and ``sample_index`` come from
        each SessionResult's ``metadata`` when it has them, else the task_id and the position in ``results``.
    :param std: GRPO std for groups whose advantages are computed here (reference shape); Polar groups carry the
        server's (ask the server with ``std=``).
    :param per_session_weight: ``weight`` = 1/num_traces, so each session weighs 1 in total.
    :raises ValueError: when the group has no token data (a Polar group listed without ``include=trajectories``),
        or a trace's arrays disagree in length.
    """
    task_id = str(group.get("task_id", ""))
    if "trajectories" in group:
        entries = list(group["trajectories"])
        default_group_id = str(group.get("group_id") or task_id)
        sessions = []
        for e in entries:
            sessions.append((e, float(e["reward"]), float(e["grpo_advantage"]), float(e["loo_advantage"]), int(e.get("sample_index", len(sessions)))))
    elif isinstance(group.get("results"), list):
        usable = []
        for position, r in enumerate(group["results"]):
            trajectory = r.get("trajectory") or {}
            trainable = ((trajectory.get("metadata") or {}).get("training_filter") or {}).get("trainable", True)
            reward = session_reward(r)
            if str(r.get("status", "")).upper() in USABLE_STATUSES and trajectory.get("traces") and trainable is not False and reward is not None:
                usable.append((r, reward, _sample_index(r, position)))
        rewards = [rw for _, rw, _ in usable]
        grpo = grpo_advantages(rewards, eps=eps, std=std)
        loo = loo_advantages(rewards)
        # Polar's TaskStatus carries its evaluated group (whose group_id is the task's label) next to the results.
        evaluated = group.get("group")
        label = evaluated.get("group_id") if isinstance(evaluated, Mapping) else None
        default_group_id = str(label or task_id)
        sessions = [(r, rw, grpo[i], loo[i], index) for i, (r, rw, index) in enumerate(usable)]
    elif "sessions" in group:
        raise ValueError(f"group {task_id} has no token data: list groups with include=trajectories or fetch GET /rollout/groups/{{task_id}}/trajectories")
    else:
        raise ValueError("not a group: expected `trajectories` (Polar) or `results` (reference TaskResult)")

    out: list[Sample] = []
    for result, reward, adv, loo, sample_index in sessions:
        traces = (result.get("trajectory") or {}).get("traces") or []
        for t, trace in enumerate(traces):
            response = list(trace["response_ids"])
            mask = list(trace["loss_mask"])
            logprobs = trace.get("response_logprobs")
            if len(mask) != len(response) or (logprobs is not None and len(logprobs) != len(response)):
                raise ValueError(f"session {result.get('session_id')} trace {t}: response_ids, loss_mask and response_logprobs differ in length")
            meta = dict(trace.get("metadata") or {})
            versions = meta.get("policy_versions") or [None]
            out.append(
                Sample(
                    task_id=str(result.get("task_id") or task_id),
                    group_id=_group_id(result, default_group_id),
                    session_id=str(result.get("session_id")),
                    sample_index=sample_index,
                    trace_index=t,
                    num_traces=len(traces),
                    prompt_ids=list(trace["prompt_ids"]),
                    response_ids=response,
                    loss_mask=mask,
                    rollout_logprobs=None if logprobs is None else [float(x) for x in logprobs],
                    reward=reward,
                    trace_reward=None if trace.get("reward") is None else float(trace["reward"]),
                    advantage=adv,
                    loo_advantage=loo,
                    policy_versions=[None if v is None else str(v) for v in versions],
                    finish_reason=_finish(trace.get("finish_reason")),
                    status=str(result.get("status", "")),
                    weight=(1.0 / len(traces)) if per_session_weight else 1.0,
                    metadata=meta,
                )
            )
    return out
