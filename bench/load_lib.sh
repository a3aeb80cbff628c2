# Sourced by the load benchmarks (ingest_vs_echo.sh, ingest_vs_vm.sh); start_exporter runs
# $accelmon. A work folder and background processes ($pids) cleaned up at exit, the processes'
# CPU and memory, and an exporter on ports the kernel picks.
hz=$(getconf CLK_TCK)
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
cpu_ns() { cat "/proc/$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f", s }'; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}

# start_exporter NAME [FLAGS...]: sets exporter_pid, grpc_port, web_port.
start_exporter() {
  local name=$1
  shift
  "$accelmon" exporter --web.listen-address 127.0.0.1:0 --grpc.listen-address 127.0.0.1:0 \
    --grpc.max-reports-per-second 1000000 "$@" >"$work/$name.log" 2>&1 &
  exporter_pid=$!
  pids+=("$exporter_pid")
  for _ in $(seq 200); do grep -qs "ingest on" "$work/$name.log" && break; sleep 0.05; done
  local ports
  ports=$(grep -Eo 'port [0-9]+' "$work/$name.log")
  grpc_port=$(sed -n 1p <<<"$ports" | grep -Eo '[0-9]+')
  web_port=$(echo "$ports" | tail -1 | grep -Eo '[0-9]+')
}
