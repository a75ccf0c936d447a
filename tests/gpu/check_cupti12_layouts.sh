#!/usr/bin/env bash
# CUDA 12.4's record layouts, from its own headers, equal those the agent
# takes from CUDA 13's deprecated structs (see record_layouts.c).
#   check_cupti12_layouts.sh CUPTI12_DIR CUDA_HOME OUTDIR
set -euo pipefail
cupti12=$1 cuda=$2 out=$3
cc=${CC:-cc}
$cc -I"$cupti12/usr/include" -I"$cuda/include" tests/gpu/record_layouts.c \
	-o "$out/layouts-12"
$cc -I"$cuda/include" tests/gpu/record_layouts.c -o "$out/layouts-13"
"$out/layouts-12" >"$out/layouts-12.txt"
"$out/layouts-13" >"$out/layouts-13.txt"
if ! diff -u "$out/layouts-12.txt" "$out/layouts-13.txt"; then
	echo "cupti: CUDA 12.4's records differ from the layouts the agent" \
		"reads (above)" >&2
	exit 1
fi
echo "cupti: CUDA 12.4's record layouts match ($(wc -l <"$out/layouts-12.txt") fields and sizes)"
