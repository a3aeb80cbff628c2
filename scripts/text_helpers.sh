# Pure text helpers shared by the end-to-end tests (tests/e2e/lib.sh) and the benchmarks
# (bench/lib.sh): they read start-up lines; nothing here starts, waits or writes.

# first_line TEXT: the first line of TEXT.
first_line() { printf '%s\n' "${1%%$'\n'*}"; }

# nth_port TEXT N: the Nth "port NUMBER" in TEXT (1 is the first), as start-up lines give them;
# fails, saying so on stderr, when TEXT has fewer.
nth_port() {
  local rest=$1 n=$2 re='port ([0-9]+)(.*)'
  while [[ $rest =~ $re ]]; do
    n=$((n - 1))
    if [ "$n" -eq 0 ]; then
      echo "${BASH_REMATCH[1]}"
      return 0
    fi
    rest=${BASH_REMATCH[2]}
  done
  echo "nth_port: no port $2 in: $1" >&2
  return 1
}
