"""The pushing thread: reads the caching allocator's statistics and calls AllocatorPush/Push."""
import logging
import os
import re
import sys
import threading
import time

DEFAULT_SOCKET = "/run/accelmon/agent.sock"
_METHOD = "/accelmon.v1.AllocatorPush/Push"

# AllocatorStats field <- torch memory_stats() key.
_STAT_FIELDS = (
    ("reserved_bytes", "reserved_bytes.all.current"),
    ("allocated_bytes", "allocated_bytes.all.current"),
    ("active_bytes", "active_bytes.all.current"),
    ("inactive_split_bytes", "inactive_split_bytes.all.current"),
    ("segments", "segment.all.current"),
    ("alloc_retries_total", "num_alloc_retries"),
    ("ooms_total", "num_ooms"),
)
_JOB_ENV = ("ACCELMON_JOB", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID")
_RANK_ENV = ("ACCELMON_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_WORLD_SIZE_ENV = ("ACCELMON_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE",
                   "PMI_SIZE")
# torch prints CUDA UUIDs bare; NVML (and so the agent) names them "GPU-<uuid>".
_BARE_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")

_log = logging.getLogger("accelmon_push")


def _first_env(names):
    for n in names:
        v = os.environ.get(n, "").strip()
        if v:
            return v
    return ""


def job_from_env():
    """The scheduler's job id: ACCELMON_JOB, SLURM_JOB_ID, PBS_JOBID, LSB_JOBID or JOB_ID."""
    return _first_env(_JOB_ENV)


def rank_from_env():
    """The distributed rank: ACCELMON_RANK, RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK."""
    return _first_env(_RANK_ENV)


def _world_size(value):
    """A positive int, or None (absent) for anything else."""
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def world_size_from_env():
    """The distributed world size: the first of ACCELMON_WORLD_SIZE, WORLD_SIZE, SLURM_NTASKS,
    OMPI_COMM_WORLD_SIZE or PMI_SIZE that is set, as a positive int; None when none is."""
    for n in _WORLD_SIZE_ENV:
        v = os.environ.get(n, "").strip()
        if v:
            return _world_size(v)
    return None


class _RateLimitedLog:
    """At most one line per period, counting what it held back (a broken agent or driver must
    not flood the training job's log)."""

    def __init__(self, period):
        self.period = period
        self._last = None
        self._held = 0

    def __call__(self, level, msg, *args):
        now = time.monotonic()
        if self._last is not None and now - self._last < self.period:
            self._held += 1
            return
        if self._held:
            msg += " (%d more messages in the last minute not shown)"
            args += (self._held,)
        self._last, self._held = now, 0
        _log.log(level, msg, *args)


class Pusher:
    """Reads allocator statistics for each device the process uses and pushes them.

    start()/stop() run push_once() on a daemon thread every `interval` seconds; push_once()
    and collect() may also be called directly. Nothing here raises into the caller except the
    constructor (bad arguments, missing python3-grpcio or generated message classes).
    """

    def __init__(self, interval=10.0, socket=None, job=None, rank=None, snapshot_interval=60.0,
                 timeout=1.0, log_period=60.0, world_size=None):
        if not interval > 0:
            raise ValueError("interval must be > 0 seconds, got %r" % (interval,))
        if not timeout > 0:
            raise ValueError("timeout must be > 0 seconds, got %r" % (timeout,))
        if not snapshot_interval >= 0:
            raise ValueError("snapshot_interval must be >= 0 seconds, got %r" % (snapshot_interval,))
        try:
            import grpc
        except ImportError as e:
            raise ImportError("accelmon_push needs the grpc and protobuf modules "
                              "(Debian: apt-get install python3-grpcio python3-protobuf)") from e
        try:
            from accelmon.v1 import push_pb2
        except ImportError as e:
            raise ImportError("accelmon_push needs the message classes accelmon.v1.push_pb2: put the "
                              "build tree's python/ folder on PYTHONPATH (cmake --build makes it)") from e
        self._grpc, self._pb = grpc, push_pb2
        self.interval = float(interval)
        self.timeout = float(timeout)
        self.snapshot_interval = float(snapshot_interval)
        path = socket or os.environ.get("ACCELMON_PUSH_SOCKET") or DEFAULT_SOCKET
        self.target = path if path.startswith("unix:") else "unix:" + path
        self.job = job_from_env() if job is None else str(job)
        self.rank = rank_from_env() if rank is None else str(rank)
        self.world_size = world_size_from_env() if world_size is None else _world_size(world_size)
        self._steps_lock = threading.Lock()
        self._steps = None  # None until the training loop calls step(): absent, not 0
        self._log = _RateLimitedLog(log_period)
        self._channel = None
        self._call = None
        self._stop = threading.Event()
        self._thread = None
        self._pid = os.getpid()
        self._identity = {}  # device index -> (uuid, node index or None)
        self._largest_free = None  # device index -> bytes, from the last snapshot
        self._last_snapshot = None  # time.monotonic() of the last snapshot attempt

    # --- the training loop's step counter ---

    def step(self, n=1):
        """Counts `n` more training steps done (thread-safe); pushed as steps_total, from which
        the exporter derives the step rate. Returns the total. Never raises."""
        try:
            n = int(n)
        except (TypeError, ValueError):
            return self.steps()
        if n < 0:
            return self.steps()
        with self._steps_lock:
            self._steps = (self._steps or 0) + n
            return self._steps

    def steps(self):
        """Steps counted so far, None before the first step()."""
        with self._steps_lock:
            return self._steps

    # --- the thread ---

    def start(self):
        self._thread = threading.Thread(target=self._run, name="accelmon-push", daemon=True)
        self._thread.start()
        _log.info("pushing allocator statistics to %s every %g s (job=%r rank=%r world_size=%r)",
                  self.target, self.interval, self.job, self.rank, self.world_size)

    def running(self):
        return (self._thread is not None and self._thread.is_alive() and
                self._pid == os.getpid() and not self._stop.is_set())

    def stop(self, timeout=5.0):
        """Ends the thread (waits up to `timeout` s for a push in flight) and closes the channel."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread() and self._pid == os.getpid():
            t.join(timeout)
        if t is None or not t.is_alive():
            self.close()

    def _run(self):
        next_round = time.monotonic()
        while not self._stop.is_set():
            try:
                self.push_once()
            except Exception as e:  # push_once catches everything; this is the last guard
                self._log(logging.WARNING, "unexpected error: %r", e)
            next_round += self.interval
            delay = next_round - time.monotonic()
            if delay < 0:  # fell behind (slow agent or driver): skip, do not burst
                next_round, delay = time.monotonic(), 0
            if self._stop.wait(delay):
                break
        self.close()

    def close(self):
        ch, self._channel, self._call = self._channel, None, None
        if ch is not None:
            try:
                ch.close()
            except Exception:
                pass

    # --- one round ---

    def push_once(self):
        """Reads and pushes once; returns how many pushes the agent accepted. Never raises."""
        try:
            messages = self.collect()
        except Exception as e:
            self._log(logging.WARNING, "reading allocator statistics failed: %r", e)
            return 0
        accepted = 0
        for m in messages:
            try:
                reply = self._stub()(m, timeout=self.timeout)
            except self._grpc.RpcError as e:
                code = e.code() if hasattr(e, "code") else None
                if code == self._grpc.StatusCode.UNAVAILABLE:
                    self._log(logging.INFO, "no agent at %s (%s); will keep trying",
                              self.target, e.details() if hasattr(e, "details") else e)
                    break  # nobody there: the other devices would fail the same way
                self._log(logging.WARNING, "push to %s failed: %s %s", self.target,
                          code, e.details() if hasattr(e, "details") else e)
                if code == self._grpc.StatusCode.DEADLINE_EXCEEDED:
                    break  # a stuck agent: do not wait `timeout` for every device
            except Exception as e:
                self._log(logging.WARNING, "push to %s failed: %r", self.target, e)
                break
            else:
                if reply.accepted:
                    accepted += 1
                else:
                    self._log(logging.WARNING, "the agent rejected device %s: %s",
                              m.device_uuid or m.device_index, reply.reason or "no reason given")
        return accepted

    def _stub(self):
        if self._call is None:
            backoff_ms = int(min(max(self.interval, 1.0), 30.0) * 1000)
            self._channel = self._grpc.insecure_channel(self.target, options=[
                # Reconnect within about one interval after the agent restarts.
                ("grpc.initial_reconnect_backoff_ms", min(1000, backoff_ms)),
                ("grpc.max_reconnect_backoff_ms", backoff_ms),
            ])
            self._call = self._channel.unary_unary(
                _METHOD, request_serializer=self._pb.AllocatorStats.SerializeToString,
                response_deserializer=self._pb.PushReply.FromString)
        return self._call

    def collect(self):
        """One AllocatorStats per device this process has allocated on (empty if torch has not
        been imported by the job, or has no CUDA/NPU device)."""
        torch = sys.modules.get("torch")  # never import it ourselves: the job decides
        if torch is None:
            return []
        name, backend = _backend(torch)
        if backend is None:
            return []
        used = []
        for i in range(backend.device_count()):
            try:
                stats = backend.memory_stats(i)
                read_ns = time.time_ns()
            except Exception as e:
                self._log(logging.WARNING, "%s memory_stats(%d) failed: %r", name, i, e)
                continue
            # Empty before the allocator starts; a zero peak: a visible device this process never used.
            if stats and stats.get("reserved_bytes.all.peak", stats.get("reserved_bytes.all.current")):
                used.append((i, stats, read_ns))
        if not used:
            return []
        largest = self._largest_free_blocks(name, backend)
        steps = self.steps()
        out = []
        for i, stats, read_ns in used:
            m = self._pb.AllocatorStats(pid=os.getpid(), job=self.job, rank=self.rank, backend=name)
            uuid, node_index = self._device_identity(torch, name, backend, i)
            m.device_uuid = uuid
            if self.world_size is not None:
                m.world_size = self.world_size
            if steps is not None:
                m.steps_total = steps
            if node_index is not None:
                m.device_index = node_index
            for field, key in _STAT_FIELDS:
                v = stats.get(key)
                if isinstance(v, int) and v >= 0:
                    setattr(m, field, v)
            if largest is not None:
                free = largest.get(i, 0)
                # The snapshot may be older than the stats: a free block cannot exceed what is
                # reserved and not active now.
                if m.HasField("reserved_bytes"):
                    in_use = m.active_bytes if m.HasField("active_bytes") else m.allocated_bytes
                    free = min(free, max(0, m.reserved_bytes - in_use))
                m.largest_free_block_bytes = free
            m.timestamp.FromNanoseconds(read_ns)
            out.append(m)
        return out

    def _largest_free_blocks(self, name, backend):
        """Device index -> largest inactive block, from memory_snapshot() at most once per
        snapshot_interval (it walks every block of every device); None when unknown."""
        if self.snapshot_interval <= 0:
            return None
        now = time.monotonic()
        if self._last_snapshot is not None and now - self._last_snapshot < self.snapshot_interval:
            return self._largest_free
        self._last_snapshot = now  # also after a failure: do not retry every round
        self._largest_free = None
        try:
            segments = backend.memory_snapshot()
        except Exception as e:
            self._log(logging.WARNING, "%s memory_snapshot() failed: %r", name, e)
            return None
        largest = {}
        for seg in segments:
            d = seg.get("device", 0)
            best = largest.get(d, 0)
            for b in seg.get("blocks", ()):
                # The allocator merges neighbouring free blocks, so each inactive block is a hole.
                if b.get("state") == "inactive" and b.get("size", 0) > best:
                    best = b["size"]
            largest[d] = best
        self._largest_free = largest
        return largest

    def _device_identity(self, torch, name, backend, i):
        """(uuid or "", index on the node or None) for the framework's device i; cached."""
        if i in self._identity:
            return self._identity[i]
        uuid = ""
        try:
            u = getattr(backend.get_device_properties(i), "uuid", None)
            uuid = "" if u is None else str(u)
        except Exception:
            pass  # older torch, or a backend without UUIDs: the index has to do
        hip = getattr(getattr(torch, "version", None), "hip", None)
        if name == "cuda" and not hip and _BARE_UUID.match(uuid):
            uuid = "GPU-" + uuid
        # Framework index i is the i-th entry of the visible-devices list, when one is set.
        var = {"cuda": "HIP_VISIBLE_DEVICES" if hip else "CUDA_VISIBLE_DEVICES",
               "npu": "ASCEND_RT_VISIBLE_DEVICES"}[name]
        visible = os.environ.get(var)
        node_index = i
        if visible is not None:
            entries = [e.strip() for e in visible.split(",")]
            entry = entries[i] if i < len(entries) else ""
            node_index = int(entry) if entry.isdigit() else None
            if not uuid and entry.startswith("GPU-"):
                uuid = entry
        self._identity[i] = (uuid, node_index)
        return self._identity[i]


def _backend(torch):
    """("cuda", torch.cuda) or ("npu", torch.npu) (torch_npu), else (None, None)."""
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_available():
        return "cuda", cuda
    npu = getattr(torch, "npu", None)
    if npu is not None and npu.is_available():
        return "npu", npu
    return None, None
