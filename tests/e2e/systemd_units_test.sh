#!/usr/bin/env bash
# deploy/systemd: `systemd-analyze verify` accepts both units with no warning at all (it exits 0
# on an unknown or misspelled directive and only warns, so any output fails), every flag they and
# their env files pass exists in the binary's --help, and systemd-sysusers accepts the user file.
source "$(dirname "$0")/lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
UNITS="$REPO/deploy/systemd"

# verify_units DIR: systemd-analyze verify on DIR's units, with ExecStart's /usr/bin/accelmon
# pointing at the built binary (verify needs the executable to exist); prints what it said.
verify_units() {
  local dir=$1 out=0
  (cd "$dir" && systemd-analyze verify ./accelmon-agent.service ./accelmon-exporter.service) \
    >"$dir/verify.log" 2>&1 || out=$?
  [ $out -eq 0 ] && [ ! -s "$dir/verify.log" ]
}
copy_units() {
  mkdir -p "$1"
  for unit in accelmon-agent.service accelmon-exporter.service; do
    sed "s|/usr/bin/accelmon |$ACCELMON |" "$UNITS/$unit" >"$1/$unit"
    grep -q "^ExecStart=$ACCELMON " "$1/$unit" || fail "$unit: no ExecStart=/usr/bin/accelmon ..."
  done
}

copy_units "$WORK/units"
verify_units "$WORK/units" || fail "systemd-analyze verify: $(cat "$WORK/units/verify.log")"

# The check itself: a misspelled directive (a warning only, exit 0) and a bad value must fail it.
copy_units "$WORK/typo"
sed -i 's/^PrivateTmp=yes/PrivatTmp=yes/' "$WORK/typo/accelmon-agent.service"
verify_units "$WORK/typo" && fail "a misspelled directive passed the check"
copy_units "$WORK/badvalue"
sed -i 's/^Restart=on-failure/Restart=sometimes/' "$WORK/badvalue/accelmon-exporter.service"
verify_units "$WORK/badvalue" && fail "a bad Restart= value passed the check"

# Type=notify only where the binary sends READY=1 (tests/e2e/sd_notify_test.sh).
for unit in accelmon-agent.service accelmon-exporter.service; do
  grep -qx 'Type=notify' "$UNITS/$unit" || fail "$unit is not Type=notify"
done

# systemctl reload sends SIGHUP, which both roles handle (tests/e2e/config_reload_test.sh).
for unit in accelmon-agent.service accelmon-exporter.service; do
  grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$UNITS/$unit" || fail "$unit: no ExecReload sending SIGHUP"
done

# Every flag in ExecStart and the env files is one the subcommand knows.
for role in agent exporter; do
  # The subcommand's flags and the global ones (--config.file, --log.level).
  { "$ACCELMON" "$role" --help; "$ACCELMON" --help; } >"$WORK/$role-help.txt"
  flags=$(grep -Eho -- '--[a-z][a-z.-]*' "$UNITS/accelmon-$role.service" "$UNITS/$role.env" |
    sort -u || true)
  [ -n "$flags" ] || fail "no flags found for $role"
  for flag in $flags; do
    grep -q -- "$flag" "$WORK/$role-help.txt" || fail "$role has no flag $flag (used in deploy/systemd)"
  done
done

# The sysusers.d file creates the accelmon user and group in a scratch root.
mkdir -p "$WORK/root/etc"
systemd-sysusers --root="$WORK/root" "$UNITS/accelmon.sysusers.conf" >"$WORK/sysusers.log" 2>&1 ||
  fail "systemd-sysusers: $(cat "$WORK/sysusers.log")"
grep -q '^accelmon:x:[0-9]*:[0-9]*:accelmon exporter:/var/lib/accelmon:/usr/sbin/nologin$' \
  "$WORK/root/etc/passwd" || fail "sysusers made no accelmon user: $(cat "$WORK/root/etc/passwd")"
grep -q '^accelmon:x:' "$WORK/root/etc/group" || fail "sysusers made no accelmon group"

echo "systemd_units_test: ok"
