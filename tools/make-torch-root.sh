#!/usr/bin/env bash
# Builds (once) a Debian root with another release's PyTorch, for tests that
# trace a build bookworm does not have:
#   tools/make-torch-root.sh sid DIR     # torch 2.14 (FunctionDescriptor)
#   tools/make-torch-root.sh trixie DIR  # torch 2.6 (three before() overloads), Python 3.13
# Idempotent: an existing root with torch in it is reused. Needs root,
# debootstrap, ~2 GB of disk and Debian's registry.
set -euo pipefail
suite=${1:?usage: make-torch-root.sh SUITE DIR}
dir=${2:?usage: make-torch-root.sh SUITE DIR}
if ls "$dir"/usr/lib/*/libtorch_cpu.so.* >/dev/null 2>&1 &&
	[ -f "$dir/.rfbpf-complete" ]; then
	exit 0
fi
command -v debootstrap >/dev/null || {
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends debootstrap >/dev/null
}
rm -rf "$dir"
debootstrap --variant=minbase --include=python3-torch "$suite" "$dir" \
	http://deb.debian.org/debian >"$dir.log" 2>&1 ||
	{ tail -5 "$dir.log" >&2; exit 1; }
touch "$dir/.rfbpf-complete"
