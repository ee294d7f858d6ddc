"""to_samples on recorded group payloads (a pi session group from the simulator, the same session rebuilt per request
as a multi-trace session, and the group in the reference's TaskResult shape), and the advantage formulas."""

import math
import unittest

from polar_client import Sample, grpo_advantages, loo_advantages, session_reward, to_samples

from .fake_server import load_fixture, to_reference_task_result


class AdvantageTest(unittest.TestCase):
    def test_grpo_population_and_unbiased(self):
        rewards = [1.0, 0.0, 0.0, 1.0]
        self.assertEqual([round(a, 5) for a in grpo_advantages(rewards)], [1.0, -1.0, -1.0, 1.0])
        unbiased = grpo_advantages(rewards, std="unbiased")
        self.assertAlmostEqual(unbiased[0], 0.5 / (math.sqrt(1 / 3) + 1e-6), places=9)
        self.assertEqual(grpo_advantages([0.5, 0.5]), [0.0, 0.0])
        self.assertEqual(grpo_advantages([]), [])
        with self.assertRaises(ValueError):
            grpo_advantages([1.0, float("nan")])
        with self.assertRaises(ValueError):
            grpo_advantages([1.0], std="sample")

    def test_leave_one_out(self):
        self.assertEqual(loo_advantages([1.0, 0.0, 0.0]), [1.0, -0.5, -0.5])
        self.assertEqual(loo_advantages([3.0]), [0.0])


class ToSamplesTest(unittest.TestCase):
    def setUp(self):
        self.group = load_fixture("polar-group.json")

    def test_polar_group_one_sample_per_trace(self):
        samples = to_samples(self.group)
        self.assertEqual(len(samples), sum(len(t["trajectory"]["traces"]) for t in self.group["trajectories"]))
        for s, t in zip(samples, self.group["trajectories"]):
            self.assertIsInstance(s, Sample)
            self.assertEqual(s.session_id, t["session_id"])
            self.assertEqual(s.reward, t["reward"])
            self.assertEqual(s.advantage, t["grpo_advantage"])
            self.assertEqual(s.loo_advantage, t["loo_advantage"])
            self.assertEqual(len(s.response_ids), len(s.loss_mask))
            self.assertEqual(len(s.rollout_logprobs), len(s.response_ids))
            self.assertEqual(s.tokens, s.prompt_ids + s.response_ids)
            self.assertEqual(s.finish_reason, "stop")
            self.assertEqual(s.policy_version, self.group["policy_versions"][0])
            # Sampled positions carry real logprobs (< 0), template positions the 0.0 placeholder.
            self.assertTrue(all(lp < 0 for lp, m in zip(s.rollout_logprobs, s.loss_mask) if m == 1))
            self.assertTrue(all(lp == 0 for lp, m in zip(s.rollout_logprobs, s.loss_mask) if m == 0))
        self.assertEqual(sorted({s.reward for s in samples}), [0.0, 1.0])

    def test_multi_trace_session_broadcasts_reward_and_advantage(self):
        group = load_fixture("polar-group-multitrace.json")
        samples = to_samples(group)
        first = [s for s in samples if s.session_id == group["trajectories"][0]["session_id"]]
        self.assertGreater(len(first), 1)
        self.assertEqual([s.trace_index for s in first], list(range(len(first))))
        self.assertEqual({s.num_traces for s in first}, {len(first)})
        self.assertEqual({s.reward for s in first}, {group["trajectories"][0]["reward"]})
        self.assertEqual({s.advantage for s in first}, {group["trajectories"][0]["grpo_advantage"]})
        weighted = to_samples(group, per_session_weight=True)
        by_session = {}
        for s in weighted:
            by_session[s.session_id] = by_session.get(s.session_id, 0) + s.weight
        self.assertEqual(set(round(w, 9) for w in by_session.values()), {1.0})

    def test_reference_task_result_gets_the_same_advantages(self):
        ref = to_reference_task_result(self.group)
        samples = to_samples(ref)
        self.assertEqual([s.reward for s in samples], self.group["rewards"])
        for s, a, l in zip(samples, self.group["grpo_advantages"], self.group["loo_advantages"]):
            self.assertAlmostEqual(s.advantage, a, places=9)
            self.assertAlmostEqual(s.loo_advantage, l, places=9)
            self.assertEqual(s.finish_reason, "stop")
        # An errored or untrainable session is left out of the group.
        ref["results"][0]["status"] = "ERROR"
        self.assertEqual(len(to_samples(ref)), len(samples) - 1)
        self.assertEqual(session_reward(ref["results"][1]), self.group["rewards"][1])

    def test_task_status_of_this_server_keeps_group_id_and_sample_index(self):
        # Recorded GET /rollout/task/{id}: sample 0 ERROR, samples 1 and 2 usable, task metadata.group_id "step-3".
        status = load_fixture("polar-task-status.json")
        samples = to_samples(status)
        self.assertEqual([s.session_id for s in samples], [r["session_id"] for r in status["results"][1:]])
        self.assertEqual([s.sample_index for s in samples], [1, 2])
        self.assertEqual({s.group_id for s in samples}, {"step-3"})
        self.assertEqual({s.task_id for s in samples}, {"rec6"})
        # The same sessions from the group endpoint give the same ids.
        grouped = to_samples(load_fixture("polar-task-group.json"))
        self.assertEqual([(s.session_id, s.sample_index, s.group_id, s.reward, s.response_ids) for s in grouped],
                         [(s.session_id, s.sample_index, s.group_id, s.reward, s.response_ids) for s in samples])

    def test_group_id_and_sample_index_fallbacks(self):
        ref = to_reference_task_result(self.group)  # no metadata: the task_id, and the position in results
        ref["results"][0]["status"] = "ERROR"
        samples = to_samples(ref)
        self.assertEqual([(s.group_id, s.sample_index) for s in samples], [(self.group["task_id"], 1)])
        for i, r in enumerate(ref["results"]):  # metadata wins over the position
            r["metadata"] = {"group_id": 12, "sample_index": 5 + i}
        self.assertEqual([(s.group_id, s.sample_index) for s in to_samples(ref)], [("12", 6)])

    def test_group_without_token_data_is_an_error(self):
        listed = {k: v for k, v in self.group.items() if k != "trajectories"}
        with self.assertRaisesRegex(ValueError, "include=trajectories"):
            to_samples(listed)
        broken = load_fixture("polar-group.json")
        broken["trajectories"][0]["trajectory"]["traces"][0]["loss_mask"].append(1)
        with self.assertRaisesRegex(ValueError, "differ in length"):
            to_samples(broken)


if __name__ == "__main__":
    unittest.main()
