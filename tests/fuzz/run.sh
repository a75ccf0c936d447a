#!/usr/bin/env bash
# Runs each fuzz target: first every kept regression input once (a crash
# that came back fails the run), then libFuzzer for SECONDS from the seed
# corpus. New inputs go to OUT/fuzz/corpus-NAME, never into the tree; a
# crash's input is written to OUT/fuzz/crash-NAME/ and the run fails.
#   tests/fuzz/run.sh SECONDS OUT NAME...
set -u
seconds=${1:?usage: run.sh SECONDS OUT NAME...}
out=${2:?usage: run.sh SECONDS OUT NAME...}
shift 2
here=$(dirname "$0")
status=0
for name in "$@"; do
	bin=$out/fuzz/fuzz_$name
	corpus=$out/fuzz/corpus-$name
	crashes=$out/fuzz/crash-$name
	mkdir -p "$corpus" "$crashes"
	regressions=("$here/regressions/$name"/*)
	if [ -e "${regressions[0]}" ]; then
		if ! "$bin" -runs=0 "${regressions[@]}" >"$crashes/regressions.log" 2>&1
		then
			echo "fuzz $name: a kept regression input fails again:"
			tail -n 30 "$crashes/regressions.log"
			status=1
			continue
		fi
	fi
	# -timeout: an input that takes 10 s is a hang, and a finding.
	# -rss_limit_mb: the sanitizers' shadow is counted; 2 GB is libFuzzer's
	# default, kept explicit.
	if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$crashes/" \
		"$corpus" "$here/corpus/$name" >"$crashes/fuzz.log" 2>&1
	then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' \
			"$crashes/fuzz.log")
		echo "fuzz $name: ${runs:-?} inputs in ${seconds}s, no crash"
	else
		echo "fuzz $name: FAILED (input in $crashes/):"
		grep -E 'ERROR|SUMMARY|runtime error|Test unit written' \
			"$crashes/fuzz.log" | head -n 10
		status=1
	fi
done
exit $status
