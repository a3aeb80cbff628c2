#!/usr/bin/env bash
# scripts/check-real-nvidia.sh, as it will run on a GPU machine, over the test NVML library and
# nvidia-smi -q -x output written for that library's values (tests/fixtures/nvidia-smi): every
# value agrees; a GPU whose memory total differs, and one nvidia-smi lists that accelmon does
# not, are each a MISMATCH row and exit 1; no nvidia-smi at all exits 2.
source "$(dirname "$0")/lib.sh"
FIXTURES=${FIXTURES:?set FIXTURES to tests/fixtures}
FAKE_NVML=${FAKE_NVML:?}
script="$(dirname "$0")/../../scripts/check-real-nvidia.sh"

fake_smi() {  # an nvidia-smi that prints $1 for -q -x
  printf '#!/bin/sh\n[ "$1 $2" = "-q -x" ] || exit 9\ncat %q\n' "$1" >"$WORK/nvidia-smi"
  chmod +x "$WORK/nvidia-smi"
}

fake_smi "$FIXTURES/nvidia-smi/q-x-test-library.xml"
rc=0
ACCELMON=$ACCELMON NVIDIA_SMI="$WORK/nvidia-smi" NVML_LIBRARY=$FAKE_NVML bash "$script" \
  >"$WORK/agree.txt" 2>&1 || rc=$?
cat "$WORK/agree.txt"
[ "$rc" -eq 0 ] || fail "over the matching output the check exited $rc"
grep -q '^| GPU 1 | memory total (MiB) | 143771 | 143771 | ok |$' "$WORK/agree.txt" ||
  fail "no agreeing memory-total row for GPU 1"
grep -q '^| GPU 0 | performance state | P0 | P0 | ok |$' "$WORK/agree.txt" ||
  fail "no agreeing performance-state row"
grep -q '^| GPU 1 | retired pages, single_bit | 2 | 2 | ok |$' "$WORK/agree.txt" ||
  fail "no agreeing retired-pages row"
grep -q '^| GPU 0 | fan (%) | absent | absent | ok |$' "$WORK/agree.txt" ||
  fail "a fan neither side reports must read absent on both"
grep -q '^| GPU 1 | ECC aggregate uncorrected, sram | 1 | 1 | ok |$' "$WORK/agree.txt" ||
  fail "no agreeing SRAM row (nvidia-smi splits SRAM uncorrectable into parity and SEC-DED)"
grep -q '^| GPU 1 | ECC volatile corrected | 3 | 3 | ok |$' "$WORK/agree.txt" ||
  fail "no agreeing ECC total row (nvidia-smi's SRAM plus DRAM)"
grep -q '^| GPU 0 | MIG mode | Disabled | Disabled | ok |$' "$WORK/agree.txt" ||
  fail "no agreeing MIG mode row"
grep -q '^| GPU 0 | NVLink fabric registered | absent | absent | ok |$' "$WORK/agree.txt" ||
  fail "a board without a fabric must read absent on both"
rows=$(grep -c '^| GPU [01] |' "$WORK/agree.txt")
[ "$rows" -eq 76 ] || fail "expected 38 values per GPU, got $rows rows"

# GPU 1's memory total differs, and a third GPU accelmon does not see.
sed -e '0,/<total>143771 MiB/! s/<total>143771 MiB/<total>81559 MiB/' \
  "$FIXTURES/nvidia-smi/q-x-test-library.xml" >"$WORK/differs.xml"
/usr/bin/python3 - "$WORK/differs.xml" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
extra = '\t<gpu id="00000000:38:00.0">\n\t\t<uuid>GPU-not-in-accelmon</uuid>\n\t</gpu>\n'
open(path, "w").write(text.replace("</nvidia_smi_log>", extra + "</nvidia_smi_log>"))
PY
fake_smi "$WORK/differs.xml"
rc=0
ACCELMON=$ACCELMON NVIDIA_SMI="$WORK/nvidia-smi" NVML_LIBRARY=$FAKE_NVML bash "$script" \
  >"$WORK/differs.txt" 2>&1 || rc=$?
cat "$WORK/differs.txt"
[ "$rc" -eq 1 ] || fail "with a differing value the check exited $rc, not 1"
grep -q '^| GPU 1 | memory total (MiB) | 143771 | 81559 | MISMATCH |$' "$WORK/differs.txt" ||
  fail "the differing memory total is not a MISMATCH row"
grep -q '^| GPU GPU-not-in-accelmon | present in accelmon | absent |' "$WORK/differs.txt" ||
  fail "a GPU only nvidia-smi lists is not named"
grep -q 'values agree; 2 MISMATCH' "$WORK/differs.txt" || fail "the summary does not count 2"

# Without nvidia-smi: cannot run.
rc=0
ACCELMON=$ACCELMON NVIDIA_SMI="$WORK/no-such-smi" bash "$script" >"$WORK/none.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "without nvidia-smi the check exited $rc, not 2"
grep -q 'no .*no-such-smi on PATH' "$WORK/none.txt" || fail "without nvidia-smi: $(cat "$WORK/none.txt")"
echo PASS
