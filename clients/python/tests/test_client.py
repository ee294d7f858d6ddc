"""PolarClient against a stand-in rollout server: what it sends (JSON, both auth headers, query params), how it reads
both task-status shapes, waiting by polling and by callback, timeouts, and errors."""

import json
import threading
import time
import unittest
import urllib.request

from polar_client import CallbackServer, PolarClient, PolarError, PolarTimeout, TaskStatus

from .fake_server import FakeRollout, load_fixture, to_polar_task_view, to_reference_task_result


def post(url: str, body: object, headers: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


class ClientTest(unittest.TestCase):
    def test_submit_sends_json_with_both_token_headers(self):
        with FakeRollout(token="s3cret") as server:
            client = PolarClient(server.url + "/", "s3cret")
            answer = client.submit({"task_id": "t1", "num_samples": 2})
            self.assertEqual(answer["task_id"], "t1")
            req = server.requests[-1]
            self.assertEqual(req["body"], {"task_id": "t1", "num_samples": 2})
            self.assertEqual(req["headers"]["authorization"], "Bearer s3cret")
            self.assertEqual(req["headers"]["x-polar-control-token"], "s3cret")
            with self.assertRaises(PolarError) as ctx:
                PolarClient(server.url, "wrong").status()
            self.assertEqual(ctx.exception.status, 401)
            self.assertIn("control-plane token", str(ctx.exception))

    def test_bad_request_error_carries_status_and_message(self):
        with FakeRollout() as server:
            with self.assertRaises(PolarError) as ctx:
                PolarClient(server.url).submit({"num_samples": 1})
            self.assertEqual(ctx.exception.status, 400)
            self.assertIn("task_id: Required", str(ctx.exception))
            with self.assertRaises(PolarError) as ctx:
                PolarClient(server.url).task("nope")
            self.assertEqual(ctx.exception.status, 404)

    def test_unreachable_server(self):
        with FakeRollout() as server:
            url = server.url
        with self.assertRaises(PolarError) as ctx:
            PolarClient(url, timeout=2).status()
        self.assertIsNone(ctx.exception.status)
        self.assertIn("cannot reach", str(ctx.exception))

    def test_task_status_in_both_shapes(self):
        task = {"task_id": "a", "num_samples": 3}
        ours = TaskStatus.parse(to_polar_task_view(task, None, done=False))
        self.assertEqual((ours.status, ours.polar_status, ours.total_sessions, ours.completed_sessions, ours.done, ours.results, ours.group), ("running", "RUNNING", 3, 0, False, [], None))
        self.assertTrue(ours.from_polar)
        ref = TaskStatus.parse(to_reference_task_result(load_fixture("polar-group.json")))
        self.assertEqual(ref.status, "completed")
        self.assertTrue(ref.done)
        self.assertFalse(ref.from_polar)
        self.assertIsNone(ref.polar_status)
        self.assertEqual(len(ref.results), ref.total_sessions)
        self.assertEqual(TaskStatus.parse({"task_id": "b", "status": "cancelled", "total_sessions": 2, "completed_sessions": 1}).done, True)
        with self.assertRaises(PolarError):
            TaskStatus.parse({"status": "running"})

    def test_task_status_recorded_from_this_server(self):
        # GET /rollout/task/{id} of `polar serve --with-sim`, 3 samples of a shell task, sample 0 failed: the
        # reference TaskStatus with its SessionResults *and* Polar's polar_status / sessions / group.
        body = load_fixture("polar-task-status.json")
        status = TaskStatus.parse(body)
        self.assertEqual((status.status, status.polar_status, status.total_sessions, status.completed_sessions, status.done), ("completed", "COMPLETED", 3, 3, True))
        self.assertTrue(status.from_polar)
        self.assertEqual([r["status"] for r in status.results], ["ERROR", "COMPLETED", "COMPLETED"])
        self.assertEqual(status.group["group_id"], "step-3")
        self.assertEqual([s["sample_index"] for s in status.group["sessions"]], [1, 2])
        # The fake server answers in the same shape, key for key.
        fake = to_polar_task_view({"task_id": "x", "num_samples": 2, "metadata": {"group_id": "g"}}, load_fixture("polar-group.json"), done=True)
        self.assertEqual(set(fake), set(body))
        self.assertEqual(set(fake["results"][0]), set(body["results"][0]))
        self.assertEqual(set(fake["results"][0]["metadata"]), set(body["results"][1]["metadata"]))
        self.assertEqual(set(fake["sessions"][0]), set(body["sessions"][0]))
        self.assertEqual(set(fake["group"]), set(body["group"]))

    def test_wait_polls_until_done_and_times_out(self):
        with FakeRollout(polls_until_done=3) as server:
            server.add_group(load_fixture("polar-group.json"))
            client = PolarClient(server.url)
            client.submit({"task_id": "t", "num_samples": 2})
            status = client.wait("t", poll_interval=0.01)
            self.assertEqual(status.status, "completed")
            self.assertEqual(status.completed_sessions, 2)
            self.assertEqual(server.paths().count("GET /rollout/task/t"), 3)
            server.polls_until_done = 10**6
            client.submit({"task_id": "slow", "num_samples": 1})
            started = time.monotonic()
            with self.assertRaises(PolarTimeout) as ctx:
                client.wait("slow", timeout=0.2, poll_interval=0.05)
            self.assertLess(time.monotonic() - started, 2)
            self.assertEqual(ctx.exception.last.status, "running")

    def test_wait_keeps_polling_while_the_server_restarts(self):
        with FakeRollout(polls_until_done=2) as server:
            server.add_group(load_fixture("polar-group.json"))
            client = PolarClient(server.url)
            client.submit({"task_id": "t", "num_samples": 2})
            server.go_down(0.5)
            status = client.wait("t", timeout=10, poll_interval=0.05)
            self.assertEqual(status.status, "completed")
            # Down past the deadline: the unreachable server is the error, not a timeout with no status.
            client.submit({"task_id": "late", "num_samples": 1})
            server.go_down(5)
            with self.assertRaises(PolarError) as ctx:
                client.wait("late", timeout=0.3, poll_interval=0.05)
            self.assertIsNone(ctx.exception.status)
            self.assertIn("cannot reach", str(ctx.exception))

    def test_wait_with_reference_server_returns_results(self):
        group = load_fixture("polar-group.json")
        with FakeRollout(shape="reference") as server:
            server.add_group(group)
            client = PolarClient(server.url)
            client.submit({"task_id": group["task_id"], "num_samples": 2})
            status = client.wait(group["task_id"], poll_interval=0.01)
            self.assertEqual(len(status.results), len(group["trajectories"]))
            self.assertIsInstance(status.results[0]["trajectory"]["traces"][0]["finish_reason"], str)

    def test_wait_by_callback(self):
        with FakeRollout(polls_until_done=10**6) as server, CallbackServer(token="cb") as callback:
            server.add_group(load_fixture("polar-group.json"))
            client = PolarClient(server.url)
            client.submit({"task_id": "t", "num_samples": 1, "callback_url": callback.url})

            def finish():
                time.sleep(0.2)
                server.polls_until_done = 0
                result = {"task_id": "t", "status": "completed", "results": [], "result_paths": [], "group": None}
                self.assertEqual(post(callback.url, result, {"authorization": "Bearer cb"})[0], 200)

            threading.Thread(target=finish).start()
            status = client.wait("t", timeout=10, poll_interval=5, callback=callback)
            self.assertEqual(status.status, "completed")
            # Waiting on the callback, not polling every interval: one look before, one after.
            self.assertLessEqual(server.paths().count("GET /rollout/task/t"), 3)

    def test_callback_server_checks_token_and_payload(self):
        seen = []
        with CallbackServer(token="cb", on_result=seen.append) as callback:
            self.assertEqual(post(callback.url, {"task_id": "x"})[0], 401)
            self.assertEqual(post(callback.url, {"status": "completed"}, {"authorization": "Bearer cb"})[0], 400)
            ref = {"task_id": "x", "status": "completed", "results": [], "result_paths": []}
            self.assertEqual(post(callback.url, ref, {"authorization": "Bearer cb"}), (200, {"ok": True}))
            self.assertEqual(callback.received("x"), ref)
            self.assertEqual(seen, [ref])
            self.assertIsNone(callback.wait_for("other", 0.05))

    def test_groups_ack_cancel_status(self):
        group = load_fixture("polar-group.json")
        with FakeRollout() as server:
            server.add_group(group)
            client = PolarClient(server.url)
            groups = client.ready_groups(std="unbiased")
            self.assertEqual([g["task_id"] for g in groups], [group["task_id"]])
            self.assertIn("trajectories", groups[0])
            self.assertEqual(server.requests[-1]["query"], {"ready": ["1"], "include": ["trajectories"], "std": ["unbiased"]})
            self.assertNotIn("trajectories", client.ready_groups(include_trajectories=False)[0])
            self.assertEqual(client.group(group["task_id"])["rewards"], group["rewards"])
            self.assertTrue(client.ack(group["task_id"]))
            self.assertFalse(client.ack(group["task_id"]))
            self.assertFalse(client.ack("no-such-task"))
            self.assertEqual(client.ready_groups(), [])
            client.submit({"task_id": "c", "num_samples": 1})
            cancelled = client.cancel("c")
            self.assertEqual((cancelled["status"], cancelled["polar_status"], cancelled["cancelled"]), ("cancelled", "CANCELLED", 1))
            self.assertEqual(client.task("c").status, "cancelled")
            self.assertIn("groups_ready", client.status())


if __name__ == "__main__":
    unittest.main()
