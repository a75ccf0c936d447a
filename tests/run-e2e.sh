#!/usr/bin/env bash
# End-to-end tests: real kernel, real BPF, Debian's real PyTorch. They need
# root (CAP_BPF, CAP_PERFMON) and run with Debian's python3, the one that
# can import torch.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e "$@"
