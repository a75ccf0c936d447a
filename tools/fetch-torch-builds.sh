#!/usr/bin/env bash
# Downloads Debian's libtorch .debs of other releases (trixie: 2.6, sid:
# 2.14) into DIR and unpacks them, without touching the system's apt state
# (tools/lib/private-apt.sh). Used by the tests that check symbol
# resolution on real builds rfbpf cannot run here.
#   tools/fetch-torch-builds.sh DIR
# Prints one unpacked libtorch_cpu.so path per line.
set -euo pipefail
. "$(dirname "$0")/lib/private-apt.sh"
private_apt_init "${1:?usage: fetch-torch-builds.sh DIR}"
for pkg in libtorch2.6 libtorch2.14; do
	if ! ls "$dir/unpacked/$pkg"/usr/lib/*/libtorch_cpu.so.* >/dev/null 2>&1
	then
		private_apt_unpack "$pkg"
	fi
	ls "$dir/unpacked/$pkg"/usr/lib/*/libtorch_cpu.so.*.*.*
done
