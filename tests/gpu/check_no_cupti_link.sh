#!/usr/bin/env bash
# Checks that librfbpf_cupti.so neither links libcupti nor carries a
# RUNPATH/RPATH (into a toolkit): it opens the job's own CUPTI at run time
# (cupti/cupti_lib.h), so a job with another CUPTI, or none, can load it.
# Usage: check_no_cupti_link.sh build/cupti/librfbpf_cupti.so
set -eu
lib=$1
bad=$(readelf -d "$lib" | grep -E 'NEEDED.*libcupti|RUNPATH|RPATH' || true)
if [ -n "$bad" ]; then
	echo "$lib: must not link libcupti or carry a run path:"
	echo "$bad"
	exit 1
fi
echo "cupti: the agent links no libcupti and has no run path"
