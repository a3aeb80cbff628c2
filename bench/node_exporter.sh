# Sourced by the benchmarks that compare with node_exporter: the one definition of "the equivalent
# collectors", so every comparison runs the same peer.
#   start_node_exporter ROOT PORT LOG   (backgrounds it; $! is its pid)
start_node_exporter() {
  prometheus-node-exporter --path.procfs="$1/proc" --path.sysfs="$1/sys" \
    --web.listen-address="127.0.0.1:$2" --collector.disable-defaults \
    --collector.meminfo --collector.vmstat --collector.pressure --collector.buddyinfo \
    --collector.netdev --collector.netclass --collector.infiniband --collector.thermal_zone \
    --collector.hwmon --no-collector.netdev.netlink --no-collector.netclass.netlink \
    --collector.netclass.ignore-invalid-speed 2>"$3" &
}
