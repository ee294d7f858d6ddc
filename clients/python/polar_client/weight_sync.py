"""Weight synchronisation around a trainer step, and a staleness filter for off-policy groups.

``weight_sync`` is the choreography every trainer repeats between optimiser steps::

    with weight_sync(client, new_version="8") as sync:   # 1. pause every gateway, wait for in-flight calls to drain
        engine.update_weights(...)                        # 2. the trainer pushes new weights to its engine(s)
    # 3. on exit: policy_version "8" on every gateway (and whatever `on_version` does), 4. resume

Pausing goes through the rollout server's fan-out (``POST /rollout/admin/inference/pause``), which waits on each
gateway until its in-flight model calls finished, so no completion is sampled half under old weights. Harness
sessions stay alive while paused; their next model call waits at the gateway. When the body raises, the gateways are
resumed at the *old* version and the exception propagates.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from .client import PolarClient
from .samples import version_number

__all__ = ["weight_sync", "WeightSync", "filter_stale", "StaleFilter", "group_version"]


@dataclass
class WeightSync:
    """What the ``with`` body sees: the version being installed and the pause fan-out's answer."""

    new_version: str
    pause_report: dict[str, Any]
    version_report: dict[str, Any] | None = None
    resume_report: dict[str, Any] | None = None

    @property
    def drained_in_flight(self) -> int:
        """Model calls that were in flight at the pause and drained before the body ran, summed over gateways."""
        return sum(int((n.get("body") or {}).get("drained_in_flight") or 0) for n in self.pause_report.get("nodes", []))


@contextlib.contextmanager
def weight_sync(
    client: PolarClient,
    new_version: str | int,
    *,
    timeout: float = 300.0,
    on_version: Callable[[str], None] | None = None,
) -> Iterator[WeightSync]:
    """Pause every gateway (waiting up to ``timeout`` s for the drain), run the body, set ``new_version`` on every
    gateway, resume.

    :param on_version: called with the new version after the body succeeded and before the gateways resume (e.g. to
        tell an engine that reports its own weight version).
    :raises PolarError: when a gateway could not be paused (already-paused ones are resumed first), or setting the
        version or resuming failed.
    """
    version = str(new_version)
    try:
        report = client.pause(timeout=timeout)
    except Exception:
        with contextlib.suppress(Exception):
            client.resume()
        raise
    sync = WeightSync(new_version=version, pause_report=report)
    try:
        yield sync
    except BaseException:
        with contextlib.suppress(Exception):
            client.resume()
        raise
    try:
        sync.version_report = client.set_policy_version(version)
        if on_version is not None:
            on_version(version)
    finally:
        sync.resume_report = client.resume()


def group_version(group: Mapping[str, Any]) -> int | None:
    """The oldest policy version a group was sampled under, as an integer: the smallest numeric entry of
    ``policy_versions``, else ``policy_version``, else ``declared_policy_version``; None when none is numeric."""
    numbers = [n for n in (version_number(v) for v in group.get("policy_versions") or []) if n is not None]
    if numbers:
        return min(numbers)
    for key in ("policy_version", "declared_policy_version"):
        n = version_number(group.get(key))
        if n is not None:
            return n
    return None


@dataclass
class StaleFilter:
    """Result of :func:`filter_stale`: ``kept`` (with ``weights`` in the same order) and ``dropped`` groups."""

    kept: list[dict[str, Any]] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)


def filter_stale(
    groups: Sequence[Mapping[str, Any]],
    current_version: int,
    max_staleness: int,
    *,
    mode: str = "drop",
    decay: float = 0.5,
) -> StaleFilter:
    """Drop or down-weight groups sampled more than ``max_staleness`` versions behind ``current_version``.

    staleness = current_version − :func:`group_version`. Groups with staleness ≤ ``max_staleness`` keep weight 1;
    beyond it, ``mode="drop"`` drops them and ``mode="downweight"`` keeps them with weight
    ``decay ** (staleness − max_staleness)``. A group without a numeric version is treated as current.

    :raises ValueError: on a negative ``max_staleness``, an unknown ``mode`` or ``decay`` outside (0, 1].
    """
    if max_staleness < 0:
        raise ValueError("max_staleness must be ≥ 0")
    if mode not in ("drop", "downweight"):
        raise ValueError(f"mode must be 'drop' or 'downweight', got {mode!r}")
    if not 0 < decay <= 1:
        raise ValueError("decay must be in (0, 1]")
    out = StaleFilter()
    for group in groups:
        version = group_version(group)
        staleness = 0 if version is None else current_version - version
        if staleness <= max_staleness:
            out.kept.append(dict(group))
            out.weights.append(1.0)
        elif mode == "drop":
            out.dropped.append(dict(group))
        else:
            out.kept.append(dict(group))
            out.weights.append(decay ** (staleness - max_staleness))
    return out
