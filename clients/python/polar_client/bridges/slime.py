"""slime bridge: Polar as slime's custom generate function.

Use: ``--custom-generate-function-path polar_client.bridges.slime.generate`` with ``POLAR_URL`` (and
``POLAR_CONTROL_TOKEN``, ``POLAR_TASK_TEMPLATE``) in the rollout workers' environment. slime calls
``await generate(args, sample, sampling_params)`` once per sample (``n_samples_per_prompt`` calls per prompt, sharing
``group_index``) and trains on what it returns (slime's ``slime/rollout/sglang_rollout.py`` documents the hook; the
``Sample`` fields used are those of ``slime/utils/types.py``: ``tokens``, ``response_length``, ``loss_mask``,
``rollout_log_probs``, ``reward``, ``status``, ``metadata``).

Each call runs one Polar session of the sample's task: ``sample.metadata["polar_task"]`` (a TaskRequest) if present,
else the template with ``sample.prompt`` (a string, or chat messages whose last user message is used) as the
instruction. The session's traces fill the sample; a multi-trace session returns a list of copies, one per trace,
each with the session's reward (slime accepts a list of samples from a custom generate function; its GRPO then groups
by ``group_index``). slime itself is not installed here: tests run these functions on stand-in Sample objects.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from ..samples import Sample
from .common import client_from_env, run_task, task_request

__all__ = ["generate", "fill_sample", "instruction_of"]


def instruction_of(prompt: Any) -> str:
    """The instruction in a slime prompt: the string itself, or the last user message's content."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        for message in reversed(prompt):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise ValueError(f"cannot find an instruction in prompt {str(prompt)[:100]}")


def _status(sample: Any, name: str) -> Any:
    status_cls = getattr(type(sample), "Status", None)
    return getattr(status_cls, name) if status_cls is not None and hasattr(status_cls, name) else name.lower()


def fill_sample(sample: Any, polar: Sample, *, tokenizer: Any = None) -> Any:
    """Write one Polar trace into a slime ``Sample`` (in place; returns it).

    ``tokens`` = prompt_ids + response_ids, ``response_length`` = len(response_ids), ``loss_mask`` and
    ``rollout_log_probs`` per response token, ``reward`` = the session's reward, ``status`` TRUNCATED when the trace
    ended on the token limit else COMPLETED, ``metadata["polar"]`` = ids, advantages and policy versions;
    ``response`` is decoded when a tokenizer is given.
    """
    sample.tokens = polar.tokens
    sample.response_length = len(polar.response_ids)
    sample.loss_mask = list(polar.loss_mask)
    sample.rollout_log_probs = None if polar.rollout_logprobs is None else list(polar.rollout_logprobs)
    sample.reward = polar.reward
    sample.status = _status(sample, "TRUNCATED" if polar.finish_reason == "length" else "COMPLETED")
    if tokenizer is not None:
        sample.response = tokenizer.decode(polar.response_ids)
    metadata = getattr(sample, "metadata", None)
    if not isinstance(metadata, dict):
        metadata = {}
        sample.metadata = metadata
    metadata["polar"] = {
        "task_id": polar.task_id, "session_id": polar.session_id, "trace_index": polar.trace_index, "num_traces": polar.num_traces,
        "advantage": polar.advantage, "loo_advantage": polar.loo_advantage, "policy_versions": polar.policy_versions,
    }
    return sample


def fill_samples(sample: Any, samples: list[Sample], *, tokenizer: Any = None) -> Any:
    """One slime Sample per trace (copies of ``sample``); a single Sample when the session has one trace; ``sample``
    marked ABORTED with reward 0 when the session produced nothing usable."""
    if not samples:
        sample.status = _status(sample, "ABORTED")
        sample.reward = 0.0
        return sample
    if len(samples) == 1:
        return fill_sample(sample, samples[0], tokenizer=tokenizer)
    return [fill_sample(copy.deepcopy(sample), s, tokenizer=tokenizer) for s in samples]


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any]) -> Any:
    """slime's custom generate hook (see the module docstring). ``args.polar_url`` / ``args.polar_timeout`` are read
    when present. Sampling parameters are passed to the harness as ``agent.settings.sampling_params``."""
    client = client_from_env(getattr(args, "polar_url", None))
    metadata = getattr(sample, "metadata", None) or {}
    task = metadata.get("polar_task")
    group_index = getattr(sample, "group_index", None)
    labels: dict[str, Any] = {"slime_index": getattr(sample, "index", None)}
    if group_index is not None:  # 0 is a group index like any other
        labels["group_id"] = str(group_index)
    request = task_request(None, task=task, instruction=None if task else instruction_of(sample.prompt), metadata=labels)
    request.setdefault("agent", {}).setdefault("settings", {})["sampling_params"] = dict(sampling_params or {})
    timeout = getattr(args, "polar_timeout", None)
    samples = await asyncio.get_running_loop().run_in_executor(None, lambda: run_task(client, request, timeout=timeout))
    return fill_samples(sample, samples, tokenizer=getattr(args, "polar_tokenizer", None))
