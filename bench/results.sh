# Sourced by the benchmark scripts: record_result KEY VALUE appends one measured value to the
# file $BENCH_RESULTS (when set), from which bench/goals.py prints issue 22's goals table.
record_result() {
  if [ -n "${BENCH_RESULTS:-}" ]; then printf '%s\t%s\n' "$1" "$2" >>"$BENCH_RESULTS"; fi
  return 0
}
