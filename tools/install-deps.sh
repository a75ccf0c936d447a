#!/usr/bin/env bash
# Installs the Debian packages rfbpf needs to build, test and demo, and only
# those that are missing (so a machine that has them is left alone); then
# the npm packages of tests/speedscope (speedscope and playwright-core, at
# the versions its package-lock.json pins), with npm ci, unless that lock
# is the one already installed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
	make gcc g++ clang llvm		# the loader and the BPF object
	libclang-rt-14-dev		# libFuzzer and the sanitizers (make fuzz)
	libstdc++-12-dev		# __cxa_demangle for kernel names (g++ has it)
	libbpf-dev bpftool libelf-dev zlib1g-dev
	libdw-dev			# unwinding the held thread (GPU agent)
	python3-torch			# the real PyTorch traced by demo and tests
	python3-pytest			# end-to-end tests
	python3-dev			# CPython's own struct layouts, checked
					# against user/python/py_stack.c
	linux-perf			# kernel-counted ground truth in tests
	libcap2-bin util-linux		# capsh/setpriv: the no-privilege test
	debootstrap			# a sid root to trace torch 2.14 in
	patchelf			# a pip-wheel layout of torch (e2e tests)
	libprotobuf-c-dev protobuf-c-compiler	# pprof and Perfetto protobuf
	protobuf-compiler		# protoc --decode: tests read them back
	libmicrohttpd-dev		# /metrics and /debug/pprof (fleet mode)
	prometheus golang-go		# real clients the fleet tests check with
	chromium			# speedscope opens the outputs in it
	groff-base man-db		# rfbpf.8 renders (e2e)
)
# Node.js and npm for tests/speedscope: the machine's own when it has them
# (a newer one than Debian's, say), else Debian's.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
	[[ $p == \#* ]] && continue
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all installed"
elif [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing ${missing[*]}: run with sudo to install them" >&2
	exit 1
else
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm ci empties node_modules and installs the lock's versions; the copy of
# the lock it leaves there says which lock that was.
ss=tests/speedscope
if ! cmp -s "$ss/package-lock.json" "$ss/node_modules/.rfbpf-lock.json"; then
	echo "deps: npm ci in $ss"
	(cd "$ss" && npm ci --no-audit --no-fund --loglevel=error)
	cp "$ss/package-lock.json" "$ss/node_modules/.rfbpf-lock.json"
fi

# CUDA 12's CUPTI, for the GPU agent's CUDA 12 test, where the agent is
# built (a CUDA toolkit is there): unpacked from Debian's packages, not
# installed (tools/fetch-cupti12.sh says why).
cupti12=${CUPTI12_DIR:-/var/cache/rfbpf/cupti12}
if [ -f "${CUDA_HOME:-/usr/local/cuda}/include/cupti.h" ] &&
	[ ! -f "$cupti12/.rfbpf-complete" ]; then
	echo "deps: CUDA 12's CUPTI (Debian trixie, non-free) into $cupti12"
	tools/fetch-cupti12.sh "$cupti12"
fi
