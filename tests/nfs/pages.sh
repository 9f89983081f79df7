#!/usr/bin/env bash
# Partial writes through the NFS backend: a write into a chunk that is not
# cached sends no READ3, save for the pages it covers only in part; reads of
# the pages a cached chunk does not hold are READ3s; write-back sends the
# pages written, one WRITE3 per range of them. The checks are
# tests/fuse/pages_check.sh's, with the export as the backend's files.
source "$(dirname "$0")/common.sh"

nfs_server_start "$WORK/export"
BACKING=$WORK/export PAGE_KEY=nfs_page_writes
mount_it() { local name=$1; shift; nfs_mount "$name" "$WORK/mnt" "$@"; }
unmount_it() { ufs_unmount "$1" "$WORK/mnt"; }
source "$(dirname "$0")/../fuse/pages_check.sh"
echo PASS
