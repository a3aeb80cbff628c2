#!/usr/bin/env bash
# The Debian package (make deb, deploy/debian/): CPack builds accelmon_<version>_<arch>.deb from
# this build; its dependencies resolve on this machine; lintian finds no error; `dpkg -i` installs
# it into a scratch root (as any user: maintainer scripts run outside a chroot and honour
# DPKG_ROOT), where the accelmon user exists, the conffiles are registered and the installed
# binary runs; `dpkg -r` keeps an edited conffile and `dpkg -P` leaves no accelmon file behind.
source "$(dirname "$0")/lib.sh"
CPACK=${CPACK:?set CPACK to cpack} CPACK_CONFIG=${CPACK_CONFIG:?set CPACK_CONFIG}
export PATH="$PATH:/usr/sbin:/sbin"  # dpkg wants ldconfig and start-stop-daemon on PATH

# The package, from what the build made (cpack installs and builds nothing).
"$CPACK" --config "$CPACK_CONFIG" -B "$WORK/pkg" >"$WORK/cpack.log" 2>&1 ||
  fail "cpack: $(cat "$WORK/cpack.log")"
debs=("$WORK"/pkg/*.deb)
[ ${#debs[@]} -eq 1 ] || fail "cpack made ${#debs[@]} packages"
deb=${debs[0]}
version=$(dpkg-deb -f "$deb" Version) arch=$(dpkg --print-architecture)
[ "$(basename "$deb")" = "accelmon_${version}_${arch}.deb" ] || fail "package named $(basename "$deb")"
[[ "$version" == "$("$ACCELMON" --version | cut -d' ' -f2)"-* ]] ||
  fail "package version $version is not the binary's"

# Dependencies: dpkg-shlibdeps found the runtime libraries, and they are all satisfiable here.
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 libgrpc++ libprotobuf libssl3 libyaml-cpp libzstd1 adduser; do
  grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
apt-get install --simulate --no-install-recommends "$deb" >"$WORK/apt.log" 2>&1 ||
  fail "the dependencies do not resolve: $(cat "$WORK/apt.log")"
grep -q '^Inst accelmon ' "$WORK/apt.log" || fail "apt would not install it: $(cat "$WORK/apt.log")"

# lintian: no errors (the warnings left are explained in docs/deployment.md).
command -v lintian >/dev/null || fail "lintian is not installed (make test-deps installs it)"
lintian --fail-on error "$deb" >"$WORK/lintian.log" 2>&1 || fail "lintian: $(cat "$WORK/lintian.log")"

# Install into a scratch root.
root="$WORK/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
# --force-depends: the scratch root's dpkg database has none of the libraries (checked above).
dpkg_root() {
  dpkg --root="$root" --force-script-chrootless --force-not-root --force-depends \
    --log=/dev/null "$@" >>"$WORK/dpkg.log" 2>&1 || fail "dpkg $*: $(cat "$WORK/dpkg.log")"
}
dpkg_root -i "$deb"
for path in usr/bin/accelmon lib/systemd/system/accelmon-agent.service \
  lib/systemd/system/accelmon-exporter.service usr/lib/sysusers.d/accelmon.conf \
  etc/accelmon/accelmon.yaml etc/accelmon/agent.env etc/accelmon/exporter.env \
  usr/share/accelmon/dashboards/fleet-overview.json usr/share/accelmon/prometheus/alerts.yml \
  usr/share/doc/accelmon/copyright usr/share/doc/accelmon/changelog.Debian.gz \
  usr/share/doc/accelmon/deployment.md usr/share/man/man1/accelmon.1.gz; do
  [ -f "$root/$path" ] || fail "not installed: /$path"
done
conffiles=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Conffiles}' accelmon)
for conffile in /etc/accelmon/accelmon.yaml /etc/accelmon/agent.env /etc/accelmon/exporter.env; do
  grep -q "^ $conffile " <<<"$conffiles" || fail "$conffile is not a conffile: $conffiles"
done
grep -q '^accelmon:' "$root/etc/passwd" || fail "postinst made no accelmon user in the root"
grep -q '^accelmon:' "$root/etc/group" || fail "postinst made no accelmon group in the root"
# The installed binary runs, and is this build's.
"$root/usr/bin/accelmon" --version >"$WORK/version.txt" || fail "the installed accelmon does not run"
[ "$(cat "$WORK/version.txt")" = "$("$ACCELMON" --version)" ] ||
  fail "installed $(cat "$WORK/version.txt"), built $("$ACCELMON" --version)"
# The shipped /etc/accelmon/accelmon.yaml is accepted by the installed binary.
"$root/usr/bin/accelmon" check config "$root/etc/accelmon/accelmon.yaml" >"$WORK/check.log" 2>&1 ||
  fail "accelmon check config rejects the shipped file: $(cat "$WORK/check.log")"

# Remove keeps the admin's edited conffiles; purge removes them, the state, and every other file.
echo 'ACCELMON_AGENT_ARGS="--exporter.address=exporter:9478"' >>"$root/etc/accelmon/agent.env"
mkdir -p "$root/var/lib/accelmon/spool"
echo state >"$root/var/lib/accelmon/spool/segment"
dpkg_root -r accelmon
[ ! -e "$root/usr/bin/accelmon" ] || fail "dpkg -r left /usr/bin/accelmon"
grep -q exporter:9478 "$root/etc/accelmon/agent.env" || fail "dpkg -r lost the edited agent.env"
dpkg_root -P accelmon
left=$(find "$root" -path "$root/var/lib/dpkg" -prune -o -printf '/%P\n' | grep -i accelmon || true)
[ -z "$left" ] || fail "left after purge: $left"
# What remains is the user and group (Debian keeps system users), their lock, empty directories.
others=$(find "$root" -path "$root/var/lib/dpkg" -prune -o -type f -printf '/%P\n' |
  grep -Ev '^/etc/((passwd|group|shadow|gshadow)-?|\.pwd\.lock)$' || true)
[ -z "$others" ] || fail "files left after purge: $others"

echo "deb_package_test: ok"
