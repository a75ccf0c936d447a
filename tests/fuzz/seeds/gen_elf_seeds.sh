#!/usr/bin/env bash
# Writes the ELF symbol reader's seed corpus (tests/fuzz/corpus/elf_symbols/)
# from elf_torch.c: small shared objects (a few KB each) that reach deep,
# each a different shape of what the reader must handle. Run it by hand
# when the reader learns a new shape; the outputs are committed.
#   tests/fuzz/seeds/gen_elf_seeds.sh
set -eu
here=$(dirname "$0")
out=$here/../corpus/elf_symbols
src=$here/elf_torch.c
cc=${CC:-gcc}
# -nostdlib: no libc startup code. noseparate-code and a 4 KB page keep
# the file small; the default link still gives two PT_LOADs (text, data).
base="-shared -fPIC -nostdlib -O1 -g0 -Wl,--build-id=none \
	-Wl,-z,noseparate-code -Wl,-z,max-page-size=0x1000 -Wl,-z,norelro"

# .dynsym and .symtab, text at vaddr == offset.
$cc $base "$src" -o "$out/torch_syms.so"
# The same, linked high: vaddr != file offset through the PT_LOADs.
$cc $base -Wl,-Ttext-segment=0x400000 "$src" -o "$out/torch_shifted.so"
# Old std::string ABI variant too, and .symtab stripped: .dynsym only.
$cc $base -DOLD_ABI -s "$src" -o "$out/torch_oldabi_stripped.so"
# Separate code: four PT_LOADs (r, rx, r, rw).
$cc ${base/noseparate-code/separate-code} "$src" -o "$out/torch_4loads.so"
# 32-bit ELF (ELFCLASS32 headers), if the compiler can.
$cc -m32 $base "$src" -o "$out/torch_elf32.so" 2>/dev/null ||
	rm -f "$out/torch_elf32.so"
# Section headers gone (what a careless strip leaves): program headers only.
cp "$out/torch_syms.so" "$out/torch_no_shdrs.so"
printf '\0\0\0\0\0\0\0\0' | dd of="$out/torch_no_shdrs.so" bs=1 seek=40 \
	conv=notrunc status=none	# e_shoff = 0
ls -l "$out"
