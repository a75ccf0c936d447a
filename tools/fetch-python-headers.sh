#!/usr/bin/env bash
# Downloads the C headers of CPython 3.13 (trixie) and 3.14 (sid) into DIR
# and unpacks them (tools/lib/private-apt.sh), for the test that holds
# rfbpf's _Py_DebugOffsets table to them.
#   tools/fetch-python-headers.sh DIR
# Prints one include directory (.../usr/include) per line.
set -euo pipefail
. "$(dirname "$0")/lib/private-apt.sh"
private_apt_init "${1:?usage: fetch-python-headers.sh DIR}"
for v in 3.13 3.14; do
	private_apt_unpack "libpython$v-dev"
	echo "$dir/unpacked/libpython$v-dev/usr/include"
done
