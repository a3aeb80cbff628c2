"""accelmon_push against the stand-in torch (fake_torch/) and a real in-process gRPC server on a
Unix socket serving accelmon.v1.AllocatorPush/Push.

Run: PYTHONPATH=clients/python:BUILD/python:tests/python/fake_torch \
       /usr/bin/python3 -m unittest discover -s tests/python -p '*_test.py'
"""
import copy
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import types
import unittest
from concurrent import futures
from unittest import mock

import grpc
import torch  # the stand-in, from tests/python/fake_torch

import accelmon_push
from accelmon.v1 import push_pb2

MiB = 1 << 20
FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "torch_cuda.json")
with open(FIXTURE, encoding="utf-8") as f:
    RECORDED = json.load(f)
# Worked out by hand from the fixture's snapshot: device 0's largest hole is the 224 MiB block
# after the pending-free one, device 1's the 512 MiB one between two activations.
LARGEST_FREE = {0: 224 * MiB, 1: 512 * MiB}
ENV_KEYS = ("ACCELMON_JOB", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID", "ACCELMON_RANK",
            "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "CUDA_VISIBLE_DEVICES",
            "ACCELMON_PUSH_SOCKET", "ACCELMON_PUSH_DISABLE", "ACCELMON_WORLD_SIZE", "WORLD_SIZE",
            "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


class FakeAgent:
    """A gRPC server on a Unix socket in a temp dir recording every AllocatorStats it gets."""

    def __init__(self, reply=None, hold=None):
        self.dir = tempfile.mkdtemp(prefix="accelmon-py-")
        self.path = os.path.join(self.dir, "agent.sock")
        self.received = []
        self.reply = reply or push_pb2.PushReply(accepted=True)
        self.hold = hold  # an Event the handler waits on (a stuck agent)
        self._cond = threading.Condition()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handler = grpc.method_handlers_generic_handler("accelmon.v1.AllocatorPush", {
            "Push": grpc.unary_unary_rpc_method_handler(
                self._push, request_deserializer=push_pb2.AllocatorStats.FromString,
                response_serializer=push_pb2.PushReply.SerializeToString)})
        self.server.add_generic_rpc_handlers((handler,))
        self.server.add_insecure_port("unix:" + self.path)
        self.server.start()

    def _push(self, request, context):
        if self.hold is not None:
            self.hold.wait(10)
        with self._cond:
            self.received.append(request)
            self._cond.notify_all()
        return self.reply

    def wait_for(self, n, seconds=10):
        with self._cond:
            self._cond.wait_for(lambda: len(self.received) >= n, seconds)
            return list(self.received)

    def close(self):
        if self.hold is not None:
            self.hold.set()
        self.server.stop(None).wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


class PushTest(unittest.TestCase):
    def setUp(self):
        self.saved_fixture = copy.deepcopy(torch.cuda._fixture)
        self.env = mock.patch.dict(os.environ, {})
        self.env.start()
        for k in ENV_KEYS:
            os.environ.pop(k, None)
        self.agent = FakeAgent()
        self.pushers = []

    def tearDown(self):
        for p in self.pushers:
            p.stop(5)
        accelmon_push.stop()
        self.agent.close()
        torch.cuda._fixture.clear()
        torch.cuda._fixture.update(self.saved_fixture)
        self.env.stop()

    def pusher(self, **kw):
        kw.setdefault("socket", self.agent.path)
        p = accelmon_push.Pusher(**kw)
        self.pushers.append(p)
        return p

    def test_pushes_recorded_stats_for_each_used_device(self):
        before = time.time_ns()
        self.assertEqual(self.pusher().push_once(), 2)
        got = self.agent.wait_for(2)
        # Device 2 is visible but this process never allocated on it: nothing to say.
        self.assertEqual([m.device_index for m in got], [0, 1])
        for m in got:
            d = RECORDED["devices"][m.device_index]
            s = d["memory_stats"]
            self.assertEqual(m.pid, os.getpid())
            self.assertEqual(m.backend, "cuda")
            self.assertEqual(m.device_uuid, "GPU-" + d["uuid"])
            self.assertEqual(m.reserved_bytes, s["reserved_bytes.all.current"])
            self.assertEqual(m.allocated_bytes, s["allocated_bytes.all.current"])
            self.assertEqual(m.active_bytes, s["active_bytes.all.current"])
            self.assertEqual(m.inactive_split_bytes, s["inactive_split_bytes.all.current"])
            self.assertEqual(m.segments, s["segment.all.current"])
            self.assertEqual(m.alloc_retries_total, s["num_alloc_retries"])
            self.assertEqual(m.ooms_total, s["num_ooms"])
            self.assertEqual(m.largest_free_block_bytes, LARGEST_FREE[m.device_index])
            self.assertGreaterEqual(m.timestamp.ToNanoseconds(), before)
            self.assertLessEqual(m.timestamp.ToNanoseconds(), time.time_ns())
        self.assertEqual(got[0].alloc_retries_total, 3)
        self.assertEqual(got[0].ooms_total, 1)

    def test_job_and_rank_from_environment(self):
        os.environ.update({"SLURM_JOB_ID": "4242", "SLURM_PROCID": "7", "RANK": "3"})
        self.pusher().push_once()
        m = self.agent.wait_for(1)[0]
        self.assertEqual((m.job, m.rank), ("4242", "3"))  # RANK (torchrun) before SLURM_PROCID
        os.environ.update({"ACCELMON_JOB": "llama-70b", "ACCELMON_RANK": "12"})
        self.assertEqual((self.pusher().job, self.pusher().rank), ("llama-70b", "12"))
        p = self.pusher(job="explicit", rank=5)
        self.assertEqual((p.job, p.rank), ("explicit", "5"))
        for k in ENV_KEYS:
            os.environ.pop(k, None)
        self.assertEqual((self.pusher().job, self.pusher().rank), ("", ""))

    def test_world_size_from_environment(self):
        os.environ.update({"PMI_SIZE": "2", "OMPI_COMM_WORLD_SIZE": "4", "SLURM_NTASKS": "8"})
        self.assertEqual(self.pusher().world_size, 8)  # SLURM_NTASKS before the MPIs
        os.environ["WORLD_SIZE"] = "16"  # torchrun
        self.assertEqual(self.pusher().world_size, 16)
        os.environ["ACCELMON_WORLD_SIZE"] = "32"
        self.pusher().push_once()
        got = self.agent.wait_for(2)
        self.assertEqual([m.world_size for m in got], [32, 32])
        self.assertEqual(self.pusher(world_size=5).world_size, 5)
        os.environ["ACCELMON_WORLD_SIZE"] = "many"  # the first one set wins, and is no number
        self.assertIsNone(self.pusher().world_size)
        for k in ENV_KEYS:
            os.environ.pop(k, None)
        p = self.pusher()
        self.assertIsNone(p.world_size)
        p.push_once()
        self.assertFalse(self.agent.wait_for(4)[3].HasField("world_size"))  # absent, not 0
        self.assertIsNone(self.pusher(world_size=0).world_size)

    def test_steps_are_counted_across_threads_and_pushed(self):
        p = self.pusher()
        p.push_once()
        self.assertFalse(self.agent.wait_for(1)[0].HasField("steps_total"))  # no step yet: absent
        self.assertIsNone(p.steps())

        def train():
            for _ in range(1000):
                p.step()
        threads = [threading.Thread(target=train) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(p.step(10), 4010)
        self.assertEqual(p.step("x"), 4010)  # nonsense is ignored, never raised
        self.assertEqual(p.step(-3), 4010)
        p.push_once()
        got = self.agent.wait_for(4)
        self.assertEqual([m.steps_total for m in got[2:]], [4010, 4010])

    def test_module_step_advances_the_running_pusher(self):
        self.assertIsNone(accelmon_push.step())  # not pushing: nothing to count, no error
        p = accelmon_push.start(interval=60, socket=self.agent.path)
        self.assertIsNotNone(p)
        accelmon_push.step()
        self.assertEqual(accelmon_push.step(2), 3)
        self.assertEqual(p.steps(), 3)

    def test_socket_from_environment(self):
        os.environ["ACCELMON_PUSH_SOCKET"] = self.agent.path
        self.assertEqual(accelmon_push.Pusher().target, "unix:" + self.agent.path)
        os.environ.pop("ACCELMON_PUSH_SOCKET")
        self.assertEqual(accelmon_push.Pusher().target, "unix:/run/accelmon/agent.sock")

    def test_visible_devices_map_to_node_indices(self):
        os.environ["CUDA_VISIBLE_DEVICES"] = "4,6,7"
        self.pusher().push_once()
        self.assertEqual([m.device_index for m in self.agent.wait_for(2)], [4, 6])

    def test_absent_agent_is_swallowed_and_logged_once(self):
        p = self.pusher(socket=os.path.join(self.agent.dir, "nobody.sock"))
        with self.assertLogs("accelmon_push", level="INFO") as logs:
            for _ in range(3):
                self.assertEqual(p.push_once(), 0)
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIn("no agent at unix:", logs.output[0])

    def test_torch_errors_are_swallowed(self):
        def broken(device=None):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        with mock.patch.object(torch.cuda, "memory_stats", broken), \
                self.assertLogs("accelmon_push", level="WARNING") as logs:
            p = self.pusher()
            self.assertEqual(p.push_once(), 0)
            self.assertEqual(p.push_once(), 0)
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIn("illegal memory access", logs.output[0])
        with mock.patch.object(torch.cuda, "device_count", broken), self.assertLogs("accelmon_push"):
            self.assertEqual(self.pusher().push_once(), 0)

    def test_no_torch_or_no_device_pushes_nothing(self):
        with mock.patch.dict(sys.modules):
            del sys.modules["torch"]
            with self.assertNoLogs("accelmon_push", level="WARNING"):
                self.assertEqual(self.pusher().push_once(), 0)
        with mock.patch.object(torch.cuda, "is_available", lambda: False):
            self.assertEqual(self.pusher().push_once(), 0)
        self.assertEqual(self.agent.received, [])

    def test_snapshot_is_rate_limited(self):
        calls = torch.cuda.snapshot_calls
        p = self.pusher(snapshot_interval=3600)
        for _ in range(3):
            p.push_once()
        self.assertEqual(torch.cuda.snapshot_calls - calls, 1)
        got = self.agent.wait_for(6)
        self.assertEqual([m.largest_free_block_bytes for m in got],
                         [LARGEST_FREE[0], LARGEST_FREE[1]] * 3)
        # A later allocation fills the hole: the cached value is capped by reserved - active.
        stats = torch.cuda._fixture["devices"][1]["memory_stats"]
        stats["active_bytes.all.current"] = stats["reserved_bytes.all.current"] - 100 * MiB
        p.push_once()
        self.assertEqual(self.agent.wait_for(8)[7].largest_free_block_bytes, 100 * MiB)
        # Off: no snapshot and no value (unknown, not zero).
        calls = torch.cuda.snapshot_calls
        self.pusher(snapshot_interval=0).push_once()
        self.assertFalse(self.agent.wait_for(10)[9].HasField("largest_free_block_bytes"))
        self.assertEqual(torch.cuda.snapshot_calls, calls)

    def test_failing_snapshot_still_pushes_stats(self):
        def broken():
            raise RuntimeError("snapshot failed")
        with mock.patch.object(torch.cuda, "memory_snapshot", broken), self.assertLogs("accelmon_push"):
            self.assertEqual(self.pusher().push_once(), 2)
        got = self.agent.wait_for(2)
        self.assertFalse(got[0].HasField("largest_free_block_bytes"))
        self.assertTrue(got[0].HasField("reserved_bytes"))

    def test_rejection_is_logged(self):
        self.agent.reply = push_pb2.PushReply(accepted=False, reason="unknown_device")
        with self.assertLogs("accelmon_push", level="WARNING") as logs:
            self.assertEqual(self.pusher().push_once(), 0)
        self.assertIn("unknown_device", logs.output[0])

    def test_stuck_agent_hits_the_deadline(self):
        self.agent.hold = threading.Event()
        with self.assertLogs("accelmon_push", level="WARNING") as logs:
            self.assertEqual(self.pusher(timeout=0.2).push_once(), 0)
        self.assertIn("DEADLINE_EXCEEDED", logs.output[0])

    def test_npu_backend(self):
        npu = types.SimpleNamespace(
            is_available=lambda: True, device_count=lambda: 1,
            memory_stats=torch.cuda.memory_stats, memory_snapshot=torch.cuda.memory_snapshot,
            get_device_properties=lambda i: types.SimpleNamespace(name="Ascend910B"))
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "5"
        with mock.patch.object(torch.cuda, "is_available", lambda: False), \
                mock.patch.object(torch, "npu", npu, create=True):
            self.assertEqual(self.pusher().push_once(), 1)
        m = self.agent.wait_for(1)[0]
        self.assertEqual((m.backend, m.device_uuid, m.device_index), ("npu", "", 5))
        self.assertEqual(m.largest_free_block_bytes, LARGEST_FREE[0])

    def test_start_pushes_every_interval_until_stop(self):
        os.environ["RANK"] = "0"
        p = accelmon_push.start(interval=0.05, socket=self.agent.path)
        self.assertIsNotNone(p)
        self.assertIs(accelmon_push.start(interval=0.05, socket=self.agent.path), p)
        got = self.agent.wait_for(6)
        self.assertGreaterEqual(len(got), 6)  # three rounds of two devices
        self.assertEqual(got[0].rank, "0")
        accelmon_push.stop()
        self.assertFalse(p.running())
        # No pushing thread is left, so nothing pushes after stop(); no need to watch for a while.
        self.assertFalse(any(t.name == "accelmon-push" and t.is_alive() for t in threading.enumerate()))

    def test_forked_child_does_not_start(self):
        # A DataLoader-style fork while the thread pushes: the child must not touch gRPC.
        p = accelmon_push.start(interval=0.02, socket=self.agent.path)
        self.agent.wait_for(2)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what start() did, then leave at once
            try:
                os.close(r)
                os.write(w, b"none" if accelmon_push.start(socket=self.agent.path) is None else b"started")
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            self.assertEqual(f.read(), b"none")
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertTrue(p.running())
        n = len(self.agent.received)
        self.assertGreater(len(self.agent.wait_for(n + 2)), n)  # the parent keeps pushing
        self.assertEqual({m.pid for m in self.agent.received}, {os.getpid()})

    def test_start_never_raises(self):
        with self.assertLogs("accelmon_push", level="WARNING") as logs:
            self.assertIsNone(accelmon_push.start(interval=0))
        self.assertIn("interval must be > 0", logs.output[0])
        os.environ["ACCELMON_PUSH_DISABLE"] = "1"
        self.assertIsNone(accelmon_push.start(socket=self.agent.path))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    unittest.main()
