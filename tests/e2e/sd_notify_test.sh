#!/usr/bin/env bash
# sd_notify (Type=notify): with $NOTIFY_SOCKET set to a datagram socket this test reads, the real
# exporter sends READY=1 once its ports accept connections and STOPPING=1 on SIGTERM; the agent
# sends READY=1 after its first collection (no exporter needed) and STOPPING=1, here over an
# abstract-namespace socket ("@name") as systemd may also pass.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

# listen_notify ADDRESS FILE: receives datagrams on ADDRESS, appending each to FILE as one line
# (newlines inside a datagram as "|"), as systemd's notify socket would read them.
listen_notify() {
  "$PY" - "$1" "$2" <<'PY' &
import socket, sys
address, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + address[1:] if address.startswith("@") else address)
open(out + ".bound", "w").close()
while True:
    data = s.recv(4096)
    with open(out, "a") as f:
        f.write(data.decode().replace("\n", "|") + "\n")
PY
  PIDS+=($!)
  wait_until 10 "the notify socket $1" test -e "$2.bound"
}
notified() { grep -q "$2" "$1" 2>/dev/null; }

# The exporter.
listen_notify "$WORK/notify.sock" "$WORK/exporter.notify"
NOTIFY_SOCKET="$WORK/notify.sock" start exporter exporter --web.listen-address 127.0.0.1:0 \
  --grpc.listen-address 127.0.0.1:0
wait_until 30 "the exporter's READY=1" notified "$WORK/exporter.notify" '^READY=1|STATUS='
# Ready means listening: the ports are in the log and /healthz answers, with no retry.
ports=$(grep -Eo 'metrics on 127.0.0.1:0 \(port [0-9]+' "$WORK/exporter.log") ||
  fail "READY=1 before the exporter logged its ports"
curl -fsS "http://127.0.0.1:${ports##* }/healthz" >/dev/null || fail "READY=1 but /healthz does not answer"
notified "$WORK/exporter.notify" STOPPING && fail "STOPPING=1 before any signal"
kill -TERM "$exporter_PID"
wait_until 30 "the exporter's STOPPING=1" notified "$WORK/exporter.notify" '^STOPPING=1$'
wait "$exporter_PID" || fail "the exporter exited $? after SIGTERM"
[ "$(grep -c '^READY=1' "$WORK/exporter.notify")" -eq 1 ] || fail "READY=1 sent more than once"

# The agent, over an abstract socket, with no exporter to reach.
abstract="@accelmon-sd-notify-test-$$"
listen_notify "$abstract" "$WORK/agent.notify"
NOTIFY_SOCKET="$abstract" start agent agent --exporter.address 127.0.0.1:1 --sim 1 \
  --collect.interval 100ms --push.socket "" --kubelet.pod-resources-socket ""
wait_until 30 "the agent's READY=1" notified "$WORK/agent.notify" '^READY=1|STATUS=collecting$'
kill -TERM "$agent_PID"
wait_until 30 "the agent's STOPPING=1" notified "$WORK/agent.notify" '^STOPPING=1$'
wait "$agent_PID" || fail "the agent exited $? after SIGTERM"
# One READY=1 though it collected many times.
[ "$(grep -c '^READY=1' "$WORK/agent.notify")" -eq 1 ] || fail "the agent sent READY=1 more than once"

echo "sd_notify_test: ok"
