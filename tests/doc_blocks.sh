#!/usr/bin/env bash
# doc_blocks.sh SRCDIR: the C blocks of docs/guide.md compile. They are
# taken in order into one function, after a prelude that declares what
# they leave to the reader (the callbacks my_flush, my_commit, my_evict;
# my_ctx, my_inode, data; the sequence numbers and the time), and compiled
# with $CC (default cc) -std=c11 -Wall -Wextra -Werror -fsyntax-only. The
# README's block is examples/readme.c's, which ctest builds and runs.
set -euo pipefail

src=$(cd "${1:?usage: doc_blocks.sh SRCDIR}" && pwd)
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "doc_blocks: no compiler $cc, skipping"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for doc in docs/guide.md; do
	blocks=$(awk '/^```c$/ { on = 1; next } /^```$/ { on = 0 } on' "$src/$doc")
	n=$(grep -c '^```c$' "$src/$doc" || true)
	{
		cat <<'PRELUDE'
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unstable/unstable.h>

static int my_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		    uint64_t length, enum us_reason reason)
{
	(void)ctx, (void)obj, (void)bufs, (void)n, (void)offset, (void)length, (void)reason;
	return 0;
}

static int my_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	(void)ctx, (void)obj, (void)reason;
	return 0;
}

static void my_evict(void *ctx, us_object *obj, uint64_t offset, uint64_t length, void *data)
{
	(void)ctx, (void)obj, (void)offset, (void)length, (void)data;
}

int example(void *my_ctx, void *my_inode, const char *data, uint64_t transno,
	    uint64_t last_committed, uint64_t seq, uint64_t now_ns);
int example(void *my_ctx, void *my_inode, const char *data, uint64_t transno,
	    uint64_t last_committed, uint64_t seq, uint64_t now_ns)
{
PRELUDE
		printf '%s\n' "$blocks"
		printf '\treturn 0;\n}\n'
	} >"$tmp/doc.c"
	if ! "$cc" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$src/include" "$tmp/doc.c" \
		2>"$tmp/err"; then
		echo "doc_blocks: FAIL: the C blocks of $doc do not compile:"
		cat "$tmp/err"
		exit 1
	fi
	echo "doc_blocks: the $n C blocks of $doc compile"
done
