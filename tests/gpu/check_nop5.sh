#!/usr/bin/env bash
# Checks that each probe of librfbpf_cupti.so begins, at its symbol, with
# the 5-byte NOP 0f 1f 44 00 00 that optimized uprobes need.
# Usage: check_nop5.sh build/cupti/librfbpf_cupti.so
set -eu
lib=$1
status=0
for sym in rfbpf_probe_gpu_launch rfbpf_probe_gpu_sync rfbpf_probe_gpu_activity \
	   rfbpf_probe_op_start rfbpf_probe_op_end; do
	first=$(objdump -d --disassemble="$sym" "$lib" |
		awk -v s="<$sym>:" '$2 == s { getline; print; exit }')
	if [[ "$first" != *"0f 1f 44 00 00"* ]]; then
		echo "$lib: $sym does not begin with nop5: $first"
		status=1
	fi
done
[ $status = 0 ] && echo "cupti: probes begin with nop5 (0f 1f 44 00 00)"
exit $status
