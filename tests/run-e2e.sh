#!/usr/bin/env bash
# End-to-end tests: real kernel, real BPF, Debian's real PyTorch. They need
# root (CAP_BPF, CAP_PERFMON) and run with Debian's python3, the one that
# can import torch. The 25 slowest tests are listed at the end: the whole
# `make test` must stay within 35 minutes on a 2-core machine (issue 27).
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider --durations=25 \
	tests/e2e "$@"
