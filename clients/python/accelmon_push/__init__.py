"""Push a training process's caching-allocator statistics to its node's accelmon agent.

    import accelmon_push
    accelmon_push.start(interval=10)
    for batch in loader:
        ...
        accelmon_push.step()   # one training step done (optional: the step rate per rank)

Device memory fragmentation lives inside the framework's caching allocator, where no vendor
library sees it. start() runs a daemon thread that every `interval` seconds reads
torch.cuda (or torch.npu) memory statistics for each device this process uses and pushes one
accelmon.v1.AllocatorStats per device over gRPC to the agent's Unix socket. It never raises
into the training job: errors are logged (logger "accelmon_push") at most once a minute, and
an absent agent is normal.

Needs python3-grpcio, python3-protobuf and the message classes generated from
proto/accelmon/v1/push.proto (`accelmon.v1.push_pb2`, in the build tree's python/ folder).
"""
import atexit
import logging
import os
import threading

from ._pusher import DEFAULT_SOCKET, Pusher, job_from_env, rank_from_env, world_size_from_env

__all__ = ["start", "stop", "step", "Pusher", "DEFAULT_SOCKET", "job_from_env", "rank_from_env",
           "world_size_from_env"]

_log = logging.getLogger("accelmon_push")
_lock = threading.Lock()
_current = None
_started_in = None  # the pid whose start() first loaded gRPC


def start(interval=10.0, socket=None, job=None, rank=None, snapshot_interval=60.0, timeout=1.0,
          world_size=None):
    """Starts pushing every `interval` seconds; returns the Pusher, or None when disabled.

    socket: the agent's Unix socket (default $ACCELMON_PUSH_SOCKET, else /run/accelmon/agent.sock).
    job, rank: free text; by default from the environment (ACCELMON_JOB, SLURM_JOB_ID, ... and
      ACCELMON_RANK, RANK, SLURM_PROCID, ...).
    world_size: a positive int; by default from the environment (ACCELMON_WORLD_SIZE, WORLD_SIZE,
      SLURM_NTASKS, OMPI_COMM_WORLD_SIZE, PMI_SIZE); absent when none is set.
    snapshot_interval: seconds between memory_snapshot() calls for the largest free block
      (expensive: it walks every block); 0 turns them off.
    timeout: the deadline of each push, in seconds.
    A second call while running returns the running Pusher. ACCELMON_PUSH_DISABLE=1 makes it a
    no-op. Never raises.
    """
    global _current, _started_in
    try:
        if os.environ.get("ACCELMON_PUSH_DISABLE", "") not in ("", "0"):
            _log.info("accelmon_push disabled by ACCELMON_PUSH_DISABLE")
            return None
        with _lock:
            if _current is not None and _current.running():
                return _current
            # gRPC's state does not survive fork(): a forked child that uses it can abort or
            # hang. Children that leave it alone (DataLoader workers) are fine.
            if _started_in is not None and _started_in != os.getpid():
                _log.warning("accelmon_push not started: this process was forked from one that "
                             "pushes (gRPC cannot be used after fork); start children with "
                             "'spawn', or call start() only in the parent")
                return None
            _started_in = os.getpid()
            _current = Pusher(interval=interval, socket=socket, job=job, rank=rank,
                              snapshot_interval=snapshot_interval, timeout=timeout,
                              world_size=world_size)
            _current.start()
            return _current
    except Exception as e:  # bad arguments, missing generated code: say so, never break training
        _log.warning("accelmon_push not started: %s", e)
        return None


def step(n=1):
    """Counts `n` training steps done on the Pusher start() runs (thread-safe), pushed as
    steps_total; returns the total, or None when not pushing. Never raises."""
    p = _current
    if p is None:
        return None
    try:
        return p.step(n)
    except Exception:
        return None


def stop(timeout=5.0):
    """Stops the thread started by start() (waits up to `timeout` seconds). Never raises."""
    global _current
    with _lock:
        p, _current = _current, None
    if p is not None:
        p.stop(timeout)


atexit.register(stop)
