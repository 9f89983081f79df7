#!/usr/bin/env bash
# cp -a of a tree of about 3,200 small files (sizes 0 to 300 KiB, in nested
# directories, with symlinks, a hard link and modes) into the mount through
# a 16 MiB root domain, diff -r against the source; then unmount and check
# the backing directory: the same content, and the same modes and
# modification times (cp -a sets them after writing: the write-back must
# not move them).
source "$(dirname "$0")/common.sh"

src=$WORK/src
mkdir -p "$src"
head -c 24M /dev/urandom >"$WORK/blob"
i=0
for size in 1 100 4095 4096 13000 131071 131072 131073 300000; do
	d=$src/d$i/sub
	mkdir -p "$d"
	# 3,160 files in all, 40 MiB: the small sizes most often.
	count=600
	[[ $size -gt 20000 ]] && count=40
	head -c $((count * size)) "$WORK/blob" | split -a 4 -b $size - "$d/f"
	i=$((i + 1))
done
: >"$src/empty"
ln -s d0/sub/faaaa "$src/link"
ln -s /nonexistent "$src/dangling"
ln "$src/d3/sub/faaab" "$src/hardlink"
chmod 600 "$src/d1/sub/faaac"
chmod 755 "$src/d2/sub/faaad"
touch -d '2001-02-03 04:05:06' "$src/d4/sub/faaaa"
nfiles=$(find "$src" -type f | wc -l)
echo "source: $nfiles files, $(du -sh "$src" | cut -f1)"

ufs_mount cp "$WORK/backing" "$WORK/mnt" --max 16M --stats "$WORK/stats"
start=$(date +%s.%N)
cp -a "$src" "$WORK/mnt/" || fail "cp -a"
end=$(date +%s.%N)
echo "cp -a: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f s", b - a }')"
diff -r --no-dereference "$src" "$WORK/mnt/src" || fail "diff -r against the mount"
ufs_unmount cp "$WORK/mnt"
diff -r --no-dereference "$src" "$WORK/backing/src" || fail "diff -r against the backing directory"

# Modes, sizes, modification times and link counts of every entry.
meta() {
	(cd "$1" && find . -printf '%p %y %m %s %n %T@\n' | sort)
}
diff <(meta "$src") <(meta "$WORK/backing/src") || fail "metadata differs"
[[ $(stat_of "$WORK/stats" / peak_charged) -le $((16 << 20)) ]] || fail "peak charged"
echo PASS
