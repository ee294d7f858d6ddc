"""The slime and verl bridges on recorded group payloads. Neither trainer is installable here, so the tests give the
bridges stand-ins with the frameworks' public field names (slime ``Sample`` with a ``Status`` enum; verl
``AgentLoopBase`` / ``AgentLoopOutput`` / ``AgentLoopMetrics``) and run the hooks end to end against a stand-in
rollout server."""

import asyncio
import copy
import enum
import os
import types
import unittest
from dataclasses import dataclass, field
from typing import Any, Optional

from polar_client import to_samples
from polar_client.bridges import slime, verl
from polar_client.bridges.common import task_request

from .fake_server import FakeRollout, load_fixture


class SlimeSample:
    """slime.utils.types.Sample's fields the bridge writes."""

    class Status(enum.Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"

    def __init__(self, prompt: Any, index: int = 0, group_index: int = 0) -> None:
        self.prompt = prompt
        self.index = index
        self.group_index = group_index
        self.tokens: list[int] = []
        self.response = ""
        self.response_length = 0
        self.reward: Optional[float] = None
        self.loss_mask: Optional[list[int]] = None
        self.rollout_log_probs: Optional[list[float]] = None
        self.status = SlimeSample.Status.PENDING
        self.metadata: dict = {}


class SlimeBridgeTest(unittest.TestCase):
    def test_fill_sample_from_a_trace(self):
        polar = to_samples(load_fixture("polar-group.json"))[0]
        sample = slime.fill_sample(SlimeSample("fix it"), polar)
        self.assertEqual(sample.tokens, polar.prompt_ids + polar.response_ids)
        self.assertEqual(sample.response_length, len(polar.response_ids))
        self.assertEqual(sample.loss_mask, polar.loss_mask)
        self.assertEqual(sample.rollout_log_probs, polar.rollout_logprobs)
        self.assertEqual(sample.reward, polar.reward)
        self.assertIs(sample.status, SlimeSample.Status.COMPLETED)
        self.assertEqual(sample.metadata["polar"]["session_id"], polar.session_id)
        polar.finish_reason = "length"
        self.assertIs(slime.fill_sample(SlimeSample("x"), polar).status, SlimeSample.Status.TRUNCATED)

    def test_multi_trace_and_empty_sessions(self):
        group = load_fixture("polar-group-multitrace.json")
        first = [s for s in to_samples(group) if s.trace_index is not None and s.session_id == group["trajectories"][0]["session_id"]]
        out = slime.fill_samples(SlimeSample("x"), first)
        self.assertIsInstance(out, list)
        self.assertEqual(len(out), len(first))
        self.assertEqual([o.response_length for o in out], [len(s.response_ids) for s in first])
        empty = slime.fill_samples(SlimeSample("x"), [])
        self.assertIs(empty.status, SlimeSample.Status.ABORTED)
        self.assertEqual(empty.reward, 0.0)

    def test_generate_labels_group_index_zero(self):
        group = load_fixture("polar-group.json")
        with FakeRollout(polls_until_done=1) as server:
            server.add_group(group)
            for index, label in ((0, "0"), (None, None)):
                sample = SlimeSample("fix the bug", index=3, group_index=index)
                sample.metadata = {"polar_task": {"task_id": "bug", "instruction": "fix the bug", "agent": {"harness": "pi"}}}
                out = asyncio.run(slime.generate(types.SimpleNamespace(polar_url=server.url, polar_timeout=10), sample, {}))
                submitted = [r["body"] for r in server.requests if r["path"] == "/rollout/task/submit"][-1]
                self.assertEqual(submitted["metadata"].get("group_id"), label)
                if label is not None:
                    self.assertEqual(out.metadata["polar"]["task_id"], submitted["task_id"])

    def test_instruction_of_chat_prompt(self):
        self.assertEqual(slime.instruction_of([{"role": "system", "content": "s"}, {"role": "user", "content": "fix the bug"}]), "fix the bug")
        with self.assertRaises(ValueError):
            slime.instruction_of(42)

    def test_generate_runs_a_polar_session(self):
        group = load_fixture("polar-group.json")
        with FakeRollout(polls_until_done=1) as server:
            server.add_group(group)
            template = {"task_id": "bug", "agent": {"harness": "pi", "model_name": "m"}, "timeout_seconds": 60}
            sample = SlimeSample("fix the bug", index=3, group_index=1)
            sample.metadata = {"polar_task": task_request(template, instruction="fix the bug")}
            args = types.SimpleNamespace(polar_url=server.url, polar_timeout=10)
            out = asyncio.run(slime.generate(args, sample, {"temperature": 1.0, "max_new_tokens": 512}))
            submitted = [r["body"] for r in server.requests if r["path"] == "/rollout/task/submit"][0]
            self.assertEqual(submitted["num_samples"], 1)
            self.assertEqual(submitted["agent"]["settings"]["sampling_params"], {"temperature": 1.0, "max_new_tokens": 512})
            self.assertEqual(submitted["metadata"]["group_id"], "1")
            self.assertIn(f"POST /rollout/groups/{submitted['task_id']}/ack", server.paths())
            self.assertEqual(out.reward, group["trajectories"][0]["reward"])
            self.assertGreater(out.response_length, 0)


@dataclass
class Metrics:
    generate_sequences: float = 0.0


@dataclass
class Output:
    prompt_ids: list
    response_ids: list
    response_mask: list
    metrics: Metrics
    response_logprobs: Optional[list] = None
    reward_score: Optional[float] = None
    num_turns: int = 0
    extra_fields: dict = field(default_factory=dict)


class Base:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


class VerlBridgeTest(unittest.TestCase):
    def test_fields_of_a_multi_trace_session(self):
        group = load_fixture("polar-group-multitrace.json")
        sid = group["trajectories"][0]["session_id"]
        samples = [s for s in to_samples(group) if s.session_id == sid]
        fields = verl.to_agent_loop_fields(samples)
        self.assertEqual(fields["response_mask"], samples[0].loss_mask)
        self.assertEqual(fields["response_logprobs"], samples[0].rollout_logprobs)
        self.assertEqual(fields["reward_score"], samples[0].reward)
        self.assertEqual(len(fields["extra_fields"]["polar_extra_traces"]), len(samples) - 1)
        with self.assertRaises(ValueError):
            verl.to_agent_loop_fields([])

    def test_num_turns_counts_as_verl_does(self):
        # verl: num_turns = user_turns + assistant_turns + 1 (ToolAgentLoop), 2 for a single turn (SingleTurnAgentLoop).
        def turns(sample):
            return verl.to_agent_loop_fields([sample])["num_turns"]

        traces = to_samples(load_fixture("polar-group.json"))  # assistant,tool,assistant and 4 assistant turns
        self.assertEqual([len(s.metadata["completion_ids"]) for s in traces], [2, 4])
        self.assertEqual([turns(s) for s in traces], [4, 8])
        single = to_samples(load_fixture("polar-task-group.json"))[0]
        self.assertEqual(turns(single), 2)
        # A trace the training filter masked whole still has its turns (its completions).
        masked = copy.deepcopy(traces[0])
        masked.loss_mask = [0] * len(masked.loss_mask)
        self.assertEqual(turns(masked), 4)
        # Without completion ids (another server), from the mask: a leading masked span is template, not a turn; a
        # trailing one is a tool/user turn.
        bare = copy.deepcopy(traces[0])
        bare.metadata = {}
        for mask, expected in (([1, 1, 0, 1], 4), ([0, 0, 1, 1], 2), ([1, 1], 2), ([1, 0, 1, 0], 5), ([], 2)):
            bare.loss_mask = mask
            self.assertEqual(turns(bare), expected, mask)

    def test_agent_loop_run(self):
        group = load_fixture("polar-group.json")
        loop_cls = verl.make_agent_loop(Base, Output, Metrics)
        with FakeRollout(polls_until_done=1) as server:
            server.add_group(group)
            os.environ["POLAR_URL"] = server.url
            try:
                task = {"task_id": "bug", "instruction": "fix", "agent": {"harness": "pi", "model_name": "m"}}
                out = asyncio.run(loop_cls().run({"temperature": 0.7}, extra_info={"polar_task": task}, raw_prompt=[]))
            finally:
                del os.environ["POLAR_URL"]
            self.assertIsInstance(out, Output)
            self.assertEqual(out.response_ids, group["trajectories"][0]["trajectory"]["traces"][0]["response_ids"])
            self.assertEqual(out.reward_score, group["trajectories"][0]["reward"])
            submitted = [r["body"] for r in server.requests if r["path"] == "/rollout/task/submit"][0]
            self.assertTrue(submitted["task_id"].startswith("bug-"))
            self.assertEqual(submitted["agent"]["settings"]["sampling_params"], {"temperature": 0.7})

    def test_verl_is_not_installed_here(self):
        self.assertIsNone(verl.PolarAgentLoop)


if __name__ == "__main__":
    unittest.main()
