#!/usr/bin/env bash
# Unpacks (once) CUDA 12's CUPTI, library and headers, from Debian's own
# packages, for the test that the GPU agent reads a CUDA 12 CUPTI's records
# with that CUPTI (tests/gpu/cupti12_records.c):
#   tools/fetch-cupti12.sh DIR
# They are trixie's non-free libcupti12 and libcupti-dev (CUDA 12.4; the
# machine's bookworm has CUDA 11.8's only, and no non-free source): the
# .debs are taken from the archive and unpacked into DIR with dpkg-deb, not
# installed, so nothing of CUDA 12 reaches the system. Idempotent; needs
# Debian's archive the first time.
set -euo pipefail
dir=${1:?usage: fetch-cupti12.sh DIR}
mirror=http://deb.debian.org/debian
suite=trixie
[ -f "$dir/.rfbpf-complete" ] && exit 0
rm -rf "$dir"
mkdir -p "$dir/debs"
# The pool path of each package, from the suite's index: a point release
# that rebuilds them changes the name, not this script.
curl -fsSL "$mirror/dists/$suite/non-free/binary-amd64/Packages.xz" |
	xz -dc >"$dir/Packages"
for pkg in libcupti12 libcupti-dev; do
	file=$(awk -v p="$pkg" '$1 == "Package:" { hit = ($2 == p) }
		hit && $1 == "Filename:" { print $2; exit }' "$dir/Packages")
	[ -n "$file" ] || { echo "fetch-cupti12: no $pkg in $suite" >&2; exit 1; }
	curl -fsSL -o "$dir/debs/${file##*/}" "$mirror/$file"
	dpkg-deb -x "$dir/debs/${file##*/}" "$dir"
done
# Only libcupti and the headers are used: the static archives and the
# profiler host libraries are most of the 96 MB.
rm -rf "$dir/debs" "$dir/Packages" "$dir"/usr/lib/*/*.a \
	"$dir"/usr/lib/*/libnvperf* "$dir"/usr/lib/*/libpcsampling* \
	"$dir"/usr/lib/*/libcheckpoint*
touch "$dir/.rfbpf-complete"
