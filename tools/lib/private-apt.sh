# Sourced by the fetch-* tools: apt-get with a private sources list, lists
# and cache under $dir (trixie and sid), never the system's apt state.
#   private_apt_init DIR; private_apt download PKG...
private_apt_init() {
	dir=$1
	mkdir -p "$dir"/{lists/partial,cache/archives/partial,unpacked}
	local key=/usr/share/keyrings/debian-archive-keyring.gpg
	cat > "$dir/sources.list" <<EOS
deb [signed-by=$key] http://deb.debian.org/debian trixie main
deb [signed-by=$key] http://deb.debian.org/debian sid main
EOS
	apt_opts=(-o "Dir::Etc::sourcelist=$dir/sources.list"
		-o Dir::Etc::sourceparts=/dev/null -o "Dir::State::Lists=$dir/lists"
		-o "Dir::Cache=$dir/cache" -o Dir::State::status=/dev/null
		-o APT::Sandbox::User=root)
}

private_apt() {
	[ -f "$dir/lists/.updated" ] ||
		{ apt-get "${apt_opts[@]}" update -qq >&2 &&
		  touch "$dir/lists/.updated"; }
	apt-get "${apt_opts[@]}" "$@"
}

# Downloads package $1 (once) and unpacks it into $dir/unpacked/$1.
private_apt_unpack() {
	local pkg=$1
	[ -f "$dir/unpacked/$pkg/.complete" ] && return 0
	(cd "$dir" && private_apt download -qq "$pkg" >&2)
	rm -rf "$dir/unpacked/$pkg"
	mkdir -p "$dir/unpacked/$pkg"
	dpkg -x "$dir"/"${pkg}"_*.deb "$dir/unpacked/$pkg"
	rm -f "$dir"/"${pkg}"_*.deb
	touch "$dir/unpacked/$pkg/.complete"
}
