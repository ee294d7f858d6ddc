"""polar_client: a stdlib-only Python client for the Polar rollout server.

- :class:`PolarClient`: submit TaskRequests, wait (polling or a :class:`CallbackServer`), pull ready groups, ack,
  cancel, status; pause / resume / policy_version fan-out.
- :func:`to_samples`: a group → one :class:`Sample` per trace (token ids, loss mask, rollout logprobs, rewards, GRPO
  and leave-one-out advantages, policy versions).
- :func:`weight_sync`: pause every gateway, drain, update weights, set the new policy_version, resume.
- :func:`filter_stale`: drop or down-weight groups sampled more than K versions behind.
- ``polar_client.bridges.slime`` / ``polar_client.bridges.verl``: trainer framework hooks.
"""

from .client import TERMINAL_STATUSES, CallbackServer, PolarClient, PolarError, PolarTimeout, TaskStatus
from .samples import Sample, grpo_advantages, loo_advantages, session_reward, to_samples, version_number
from .weight_sync import StaleFilter, WeightSync, filter_stale, group_version, weight_sync

__version__ = "0.1.0"

__all__ = [
    "PolarClient", "PolarError", "PolarTimeout", "TaskStatus", "CallbackServer", "TERMINAL_STATUSES",
    "Sample", "to_samples", "grpo_advantages", "loo_advantages", "session_reward", "version_number",
    "weight_sync", "WeightSync", "filter_stale", "StaleFilter", "group_version",
]
