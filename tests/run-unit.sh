#!/usr/bin/env bash
# Runs every unit-test binary given on the command line and prints one
# closing line with the totals. Exit status 1 if any test failed.
set -u
passed=0 failed=0 status=0
for t in "$@"; do
	out=$("$t") || status=1
	printf '%s\n' "$out"
	line=$(printf '%s\n' "$out" | tail -n 1)
	p=$(sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' <<<"$line")
	f=$(sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' <<<"$line")
	if [ -z "$p" ]; then
		echo "$t: crashed or printed no result"
		failed=$((failed + 1)) status=1
		continue
	fi
	passed=$((passed + p)) failed=$((failed + f))
done
echo "unit: $passed passed, $failed failed"
exit $status
