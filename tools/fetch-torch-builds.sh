#!/usr/bin/env bash
# Downloads Debian's libtorch .debs of other releases (trixie: 2.6, sid:
# 2.14) into DIR and unpacks them, without touching the system's apt state:
# a private sources list, lists and cache live under DIR. Used by the tests
# that check symbol resolution on real builds rfbpf cannot run here.
#   tools/fetch-torch-builds.sh DIR
# Prints one unpacked libtorch_cpu.so path per line.
set -euo pipefail
dir=${1:?usage: fetch-torch-builds.sh DIR}
mkdir -p "$dir"/{lists/partial,cache/archives/partial,unpacked}
key=/usr/share/keyrings/debian-archive-keyring.gpg
cat > "$dir/sources.list" <<EOS
deb [signed-by=$key] http://deb.debian.org/debian trixie main
deb [signed-by=$key] http://deb.debian.org/debian sid main
EOS
apt_opts=(-o "Dir::Etc::sourcelist=$dir/sources.list"
	-o Dir::Etc::sourceparts=/dev/null -o "Dir::State::Lists=$dir/lists"
	-o "Dir::Cache=$dir/cache" -o Dir::State::status=/dev/null
	-o APT::Sandbox::User=root)
for pkg in libtorch2.6 libtorch2.14; do
	if ! ls "$dir/unpacked/$pkg"/usr/lib/*/libtorch_cpu.so.* >/dev/null 2>&1
	then
		[ -f "$dir/lists/.updated" ] ||
			{ apt-get "${apt_opts[@]}" update -qq >&2 &&
			  touch "$dir/lists/.updated"; }
		(cd "$dir" && apt-get "${apt_opts[@]}" download -qq "$pkg" >&2)
		mkdir -p "$dir/unpacked/$pkg"
		dpkg -x "$dir"/"${pkg}"_*.deb "$dir/unpacked/$pkg"
		rm -f "$dir"/"${pkg}"_*.deb
	fi
	ls "$dir/unpacked/$pkg"/usr/lib/*/libtorch_cpu.so.*.*.*
done
