#!/usr/bin/env bash
# Partial writes through the directory backend: a write into a chunk that is
# not cached reads nothing from the backing file, save the pages it covers
# only in part; reads of the pages a cached chunk does not hold go to the
# backing file; write-back sends the pages written. The checks are
# tests/fuse/pages_check.sh's.
source "$(dirname "$0")/common.sh"

BACKING=$WORK/backing PAGE_KEY=page_ranges
mkdir -p "$BACKING"
mount_it() { local name=$1; shift; ufs_mount "$name" "$BACKING" "$WORK/mnt" "$@"; }
unmount_it() { ufs_unmount "$1" "$WORK/mnt"; }
source "$(dirname "$0")/pages_check.sh"
echo PASS
