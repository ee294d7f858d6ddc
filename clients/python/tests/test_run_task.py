"""bridges.common.run_task, the path both bridges take, against the stand-in server in this repository's shapes and in
the reference Polar's: on this server the samples come from the group endpoint (the server's advantages) and the group
is acknowledged as asked; only the reference server is read from its task status's `results`."""

import unittest

from polar_client import PolarClient, to_samples
from polar_client.bridges.common import run_task

from .fake_server import FakeRollout, load_fixture


class RunTaskTest(unittest.TestCase):
    def test_this_server_group_is_fetched_and_acked(self):
        group = load_fixture("polar-group.json")
        with FakeRollout(polls_until_done=1) as server:
            server.add_group(group)
            client = PolarClient(server.url)
            samples = run_task(client, {"task_id": "t1", "num_samples": 2, "metadata": {"group_id": "step-1"}}, timeout=10)
            self.assertIn("GET /rollout/groups/t1/trajectories", server.paths())
            self.assertEqual(server.paths()[-1], "POST /rollout/groups/t1/ack")
            # The server's advantages, exactly (not recomputed here), and its group label.
            self.assertEqual([s.advantage for s in samples], group["grpo_advantages"])
            self.assertEqual([s.loo_advantage for s in samples], group["loo_advantages"])
            self.assertEqual({s.group_id for s in samples}, {"step-1"})
            # Acknowledged: a trainer pulling ready groups does not get it a second time.
            self.assertNotIn("t1", [g["task_id"] for g in client.ready_groups()])

    def test_ack_false_leaves_the_group_ready(self):
        with FakeRollout(polls_until_done=1) as server:
            server.add_group(load_fixture("polar-group.json"))
            client = PolarClient(server.url)
            samples = run_task(client, {"task_id": "t2", "num_samples": 2}, timeout=10, ack=False)
            self.assertEqual(len(samples), 2)
            self.assertNotIn("POST /rollout/groups/t2/ack", server.paths())
            self.assertIn("t2", [g["task_id"] for g in client.ready_groups()])

    def test_recorded_group_keeps_sample_indices(self):
        group = load_fixture("polar-task-group.json")  # recorded: samples 1 and 2 usable, group_id "step-3"
        with FakeRollout(polls_until_done=1) as server:
            server.add_group(group)
            samples = run_task(PolarClient(server.url), {"task_id": group["task_id"], "num_samples": 3, "metadata": {"group_id": "step-3"}}, timeout=10)
            self.assertEqual([(s.sample_index, s.group_id) for s in samples], [(1, "step-3"), (2, "step-3")])
            self.assertIn(f"POST /rollout/groups/{group['task_id']}/ack", server.paths())

    def test_failed_task_has_no_samples(self):
        with FakeRollout(polls_until_done=1) as server:  # no group: every session failed
            client = PolarClient(server.url)
            self.assertEqual(run_task(client, {"task_id": "f", "num_samples": 2}, timeout=10), [])
            self.assertEqual(client.task("f").polar_status, "FAILED")
            self.assertNotIn("POST /rollout/groups/f/ack", server.paths())

    def test_reference_server_is_read_from_the_task_status(self):
        group = load_fixture("polar-group.json")
        with FakeRollout(shape="reference", polls_until_done=1) as server:
            server.add_group(group)
            samples = run_task(PolarClient(server.url), {"task_id": group["task_id"], "num_samples": 2}, timeout=10)
            self.assertFalse([p for p in server.paths() if "/rollout/groups" in p])
            self.assertEqual([s.reward for s in samples], group["rewards"])
            for s, a in zip(samples, group["grpo_advantages"]):
                self.assertAlmostEqual(s.advantage, a, places=9)
            self.assertEqual([s.reward for s in samples], [s.reward for s in to_samples(group)])


if __name__ == "__main__":
    unittest.main()
