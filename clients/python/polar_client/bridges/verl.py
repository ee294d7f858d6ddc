"""verl bridge: Polar as a verl agent loop.

verl's agent loop interface (``verl/experimental/agent_loop/agent_loop.py``): a class registered by name with
``@register(name)``, subclassing ``AgentLoopBase``, whose ``async run(self, sampling_params, **kwargs)`` returns an
``AgentLoopOutput(prompt_ids, response_ids, response_mask, response_logprobs, reward_score, num_turns, metrics,
extra_fields)`` for one dataset row (``kwargs`` are the row's fields). Select it with
``actor_rollout_ref.rollout.agent.default_agent_loop=polar_agent`` (or an ``agent_name`` column).

``PolarAgentLoop.run`` runs one Polar session for the row: ``extra_info["polar_task"]`` (a TaskRequest) if present,
else ``$POLAR_TASK_TEMPLATE`` with the row's last user message as the instruction. verl wants one sequence per row, so
the session's first trace is returned and any further traces (fork / compaction chains) go to
``extra_fields["polar_extra_traces"]``; Polar's mask (1 = sampled) is verl's ``response_mask``, and the session's reward
is ``reward_score``. verl is not installed here: :func:`make_agent_loop` builds the class from the base classes it
is given, which tests fill with stand-ins; importing this module registers it when verl is importable.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..samples import Sample
from .common import client_from_env, run_task, task_request

__all__ = ["to_agent_loop_fields", "make_agent_loop", "num_turns"]


def num_turns(sample: Sample) -> int:
    """verl's ``AgentLoopOutput.num_turns`` for one trace: chat turns including user, assistant and tool, counted as
    verl's own loops do (``ToolAgentLoop``: ``user_turns + assistant_turns + 1``, the 1 being the prompt;
    ``SingleTurnAgentLoop``: 2).

    Assistant turns are the trace's completions (``metadata.completion_ids``, which Polar fills; this also holds for a
    trace the training filter masked whole, or a completion that sampled no token), with one user/tool turn between
    each two. Without completion ids: the runs of sampled (mask 1) tokens, and the masked spans that follow one (tool
    results and user messages; a masked span before the first sampled token is template, not a turn). So a
    single-completion trace has 2 turns and assistant, tool, assistant has 4.
    """
    completions = (sample.metadata or {}).get("completion_ids")
    if isinstance(completions, list) and completions:
        assistant = len(completions)
        user = assistant - 1  # a Polar trace is completion, interstitial, completion, …: it ends on a completion
    else:
        mask = sample.loss_mask
        runs = [value for i, value in enumerate(mask) if i == 0 or mask[i - 1] != value]
        assistant = max(1, runs.count(1))
        user = runs[1:].count(0) if runs and runs[0] == 0 else runs.count(0)
    return 1 + assistant + user


def to_agent_loop_fields(samples: list[Sample]) -> dict[str, Any]:
    """``AgentLoopOutput`` keyword arguments (without ``metrics``) for a session's samples.

    :raises ValueError: when the session has no sample (nothing usable came back).
    """
    if not samples:
        raise ValueError("the Polar session produced no usable trace")
    first = samples[0]
    return {
        "prompt_ids": first.prompt_ids,
        "response_ids": first.response_ids,
        "response_mask": first.loss_mask,
        "response_logprobs": first.rollout_logprobs,
        "reward_score": first.reward,
        "num_turns": num_turns(first),
        "extra_fields": {
            "polar_session_id": first.session_id,
            "polar_task_id": first.task_id,
            "polar_policy_versions": first.policy_versions,
            "polar_extra_traces": [
                {"prompt_ids": s.prompt_ids, "response_ids": s.response_ids, "response_mask": s.loss_mask, "response_logprobs": s.rollout_logprobs}
                for s in samples[1:]
            ],
        },
    }


def make_agent_loop(base: type, output_cls: type, metrics_cls: type) -> type:
    """The agent loop class on verl's ``AgentLoopBase``, ``AgentLoopOutput`` and ``AgentLoopMetrics``."""

    class PolarAgentLoop(base):  # type: ignore[misc, valid-type]
        """Runs one Polar session per dataset row (see the module docstring)."""

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            extra = kwargs.get("extra_info") or {}
            task = extra.get("polar_task")
            instruction = None
            if task is None:
                messages = kwargs.get("raw_prompt") or []
                instruction = next((m["content"] for m in reversed(list(messages)) if m.get("role") == "user"), None)
            request = task_request(None, task=task, instruction=instruction)
            request.setdefault("agent", {}).setdefault("settings", {})["sampling_params"] = dict(sampling_params or {})
            client = client_from_env()
            samples = await asyncio.get_running_loop().run_in_executor(None, lambda: run_task(client, request))
            return output_cls(**to_agent_loop_fields(samples), metrics=metrics_cls())

    return PolarAgentLoop


try:  # pragma: no cover - verl is not installed where the tests run
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

    PolarAgentLoop = register("polar_agent")(make_agent_loop(AgentLoopBase, AgentLoopOutput, AgentLoopMetrics))
except ImportError:
    PolarAgentLoop = None
