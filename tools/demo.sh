#!/usr/bin/env bash
# `make demo`: trace the bundled workload (two threads training a small MLP)
# from its first op, print the table, write a Chrome trace and folded stacks.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "demo: rfbpf needs CAP_BPF and CAP_PERFMON: run 'sudo make demo'" >&2
	exit 1
fi
./rfbpf --top 25 -o rfbpf-demo.json --folded rfbpf-demo.folded -- \
	/usr/bin/python3 tests/workloads/mlp_threads.py --observer --steps 20
echo
echo "Trace written to $PWD/rfbpf-demo.json"
echo "  open it in https://ui.perfetto.dev or chrome://tracing"
echo "Folded stacks written to $PWD/rfbpf-demo.folded"
echo "  flamegraph.pl rfbpf-demo.folded > demo.svg, or load it in speedscope"
