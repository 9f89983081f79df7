#!/usr/bin/env bash
# cp -a of a tree of about 900 small files (sizes 0 to 300 KiB, in nested
# directories, with symlinks, a hard link and modes) into the NFS backend's
# mount through a 16 MiB max, diff -r against the source through the mount;
# then unmount and check the export on the server's side: the same content,
# and the same modes, link counts and modification times (to the second:
# not of symlinks).
source "$(dirname "$0")/common.sh"

src=$WORK/src
mkdir -p "$src"
head -c 24M /dev/urandom >"$WORK/blob"
i=0
for size in 1 100 4095 4096 13000 131071 131072 131073 300000; do
	d=$src/d$i/sub
	mkdir -p "$d"
	count=150
	[[ $size -gt 20000 ]] && count=20
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

nfs_server_start "$WORK/export"
nfs_mount cp "$WORK/mnt" --max 16M --stats "$WORK/stats"
start=$(date +%s.%N)
cp -a "$src" "$WORK/mnt/" || fail "cp -a"
end=$(date +%s.%N)
echo "cp -a: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f s", b - a }')"
diff -r --no-dereference "$src" "$WORK/mnt/src" || fail "diff -r against the mount"
ufs_unmount cp "$WORK/mnt"
diff -r --no-dereference "$src" "$WORK/export/src" || fail "diff -r against the export"

# Modes, sizes, link counts and modification times of every entry (not of
# symlinks: their times do not reach the export, see docs/nfs.md).
meta() {
	(cd "$1" && find . \( -type l -printf '%p %y %m %s %n\n' \) -o -printf '%p %y %m %s %n %Ts\n' | sort)
}
diff <(meta "$src") <(meta "$WORK/export/src") || fail "metadata differs"
peak=$(stat_of "$WORK/stats" / peak_charged)
echo "root domain: peak charged $peak of max $((16 << 20))"
[[ $peak -le $((16 << 20)) ]] || fail "peak charged $peak"
echo PASS
