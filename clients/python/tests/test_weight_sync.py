"""weight_sync's choreography (pause → body → policy_version → resume; resume without a new version when the body
fails; a failed pause) and the staleness filter."""

import unittest

from polar_client import PolarClient, PolarError, filter_stale, group_version, weight_sync

from .fake_server import FakeRollout


class WeightSyncTest(unittest.TestCase):
    def test_order_and_reports(self):
        with FakeRollout() as server:
            client = PolarClient(server.url)
            seen = []
            with weight_sync(client, 8, on_version=seen.append) as sync:
                self.assertEqual(server.paths(), ["POST /rollout/admin/inference/pause"])
                self.assertEqual(sync.drained_in_flight, 3)
                server.requests.append({"method": "BODY", "path": "update", "query": {}, "headers": {}, "body": None})
            self.assertEqual(server.paths(), ["POST /rollout/admin/inference/pause", "BODY update", "POST /rollout/admin/policy_version", "POST /rollout/admin/inference/resume"])
            self.assertEqual(server.requests[2]["body"]["policy_version"], "8")
            self.assertEqual(seen, ["8"])
            self.assertEqual(sync.version_report["nodes"][0]["body"]["policy_version"], "8")

    def test_failing_body_resumes_at_the_old_version(self):
        with FakeRollout() as server:
            client = PolarClient(server.url)
            with self.assertRaises(RuntimeError):
                with weight_sync(client, 9):
                    raise RuntimeError("engine refused the weights")
            self.assertEqual(server.paths(), ["POST /rollout/admin/inference/pause", "POST /rollout/admin/inference/resume"])

    def test_failed_pause_raises_and_resumes(self):
        with FakeRollout() as server:
            server.fail_pause = True
            client = PolarClient(server.url)
            with self.assertRaises(PolarError) as ctx:
                with weight_sync(client, 2, timeout=1):
                    self.fail("the body must not run")
            self.assertEqual(ctx.exception.status, 502)
            self.assertEqual(ctx.exception.body["nodes"][0]["node_id"], "n1")
            self.assertEqual(server.paths()[-1], "POST /rollout/admin/inference/resume")


class StalenessTest(unittest.TestCase):
    groups = [
        {"task_id": "now", "policy_versions": ["5"]},
        {"task_id": "one-behind", "policy_versions": ["4", "5"]},
        {"task_id": "three-behind", "policy_versions": ["2"]},
        {"task_id": "declared", "policy_versions": [], "declared_policy_version": "1"},
        {"task_id": "unknown", "policy_versions": []},
    ]

    def test_group_version(self):
        self.assertEqual([group_version(g) for g in self.groups], [5, 4, 2, 1, None])

    def test_drop(self):
        out = filter_stale(self.groups, 5, 1)
        self.assertEqual([g["task_id"] for g in out.kept], ["now", "one-behind", "unknown"])
        self.assertEqual([g["task_id"] for g in out.dropped], ["three-behind", "declared"])
        self.assertEqual(out.weights, [1.0, 1.0, 1.0])

    def test_downweight(self):
        out = filter_stale(self.groups, 5, 1, mode="downweight", decay=0.5)
        self.assertEqual(out.dropped, [])
        self.assertEqual(dict(zip([g["task_id"] for g in out.kept], out.weights)), {"now": 1.0, "one-behind": 1.0, "three-behind": 0.25, "declared": 0.125, "unknown": 1.0})

    def test_bad_arguments(self):
        for kwargs in ({"max_staleness": -1}, {"max_staleness": 1, "mode": "skip"}, {"max_staleness": 1, "decay": 0}):
            with self.assertRaises(ValueError):
                filter_stale(self.groups, 5, **kwargs)


if __name__ == "__main__":
    unittest.main()
