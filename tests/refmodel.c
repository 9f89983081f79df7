/*
 * The reference model: see refmodel.h.
 *
 * SPDX-License-Identifier: MIT
 */
#include "refmodel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rm_fail(const struct rm *m, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "model: step %llu: ", m ? (unsigned long long)m->ops : 0ull);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	abort();
}

void rm_init(struct rm *m, uint64_t root_max)
{
	memset(m, 0, sizeof(*m));
	m->dom[0] = (struct rm_dom){ .used = true, .parent = -1, .max = root_max };
	m->next_uid = 1;
}

int rm_dom_add(struct rm *m, int parent, uint64_t max)
{
	int i;

	RM_ASSERT(m, parent >= 0 && parent < RM_NDOM && m->dom[parent].used, "bad parent");
	for (i = 1; i < RM_NDOM; i++) {
		if (!m->dom[i].used) {
			m->dom[i] = (struct rm_dom){ .used = true, .parent = parent, .max = max };
			return i;
		}
	}
	return -1;
}

bool rm_under(const struct rm *m, int d, int ancestor)
{
	for (; d >= 0; d = m->dom[d].parent)
		if (d == ancestor)
			return true;
	return false;
}

uint64_t rm_bytes(const struct rm *m, int d, int state)
{
	uint64_t sum = 0;
	int i;

	for (i = 0; i < RM_NBUF; i++) {
		const struct rm_buf *b = &m->buf[i];

		if (!b->used || !rm_under(m, m->obj[b->obj].dom, d))
			continue;
		if (state == -1 || b->state == state ||
		    (state == -2 && b->state == RM_CLEAN && b->refs == 0))
			sum += b->len;
	}
	return sum;
}

void rm_sums(const struct rm *m, uint64_t sums[RM_NDOM][RM_NSUM])
{
	int i, d;

	memset(sums, 0, sizeof(uint64_t) * RM_NDOM * RM_NSUM);
	for (i = 0; i < RM_NBUF; i++) {
		const struct rm_buf *b = &m->buf[i];

		if (!b->used)
			continue;
		for (d = m->obj[b->obj].dom; d >= 0; d = m->dom[d].parent) {
			sums[d][b->state] += b->len;
			sums[d][RM_SUM_CHARGED] += b->len;
			if (b->state == RM_CLEAN && b->refs == 0)
				sums[d][RM_SUM_EVICTABLE] += b->len;
		}
	}
}

bool rm_dom_busy(const struct rm *m, int d)
{
	int i;

	for (i = 0; i < RM_NDOM; i++)
		if (m->dom[i].used && m->dom[i].parent == d)
			return true;
	for (i = 0; i < RM_NOBJ; i++)
		if (m->obj[i].used && m->obj[i].dom == d)
			return true;
	return rm_bytes(m, d, -1) != 0;
}

int rm_set_max_result(const struct rm *m, int d, uint64_t v)
{
	uint64_t charged = rm_bytes(m, d, -1), evictable = rm_bytes(m, d, -2);

	return charged - evictable > v ? -16 /* -EBUSY */ : 0;
}

int rm_obj_add(struct rm *m, int dom, int bk, void *h)
{
	int i;

	for (i = 0; i < RM_NOBJ; i++) {
		if (!m->obj[i].used) {
			m->obj[i] = (struct rm_obj){ .used = true, .dom = dom, .bk = bk, .h = h };
			return i;
		}
	}
	return -1;
}

bool rm_obj_busy(const struct rm *m, int o)
{
	int i;

	for (i = 0; i < RM_NBUF; i++) {
		const struct rm_buf *b = &m->buf[i];

		if (b->used && b->obj == o && (b->state != RM_CLEAN || b->refs))
			return true;
	}
	return false;
}

int rm_obj_nbufs(const struct rm *m, int o)
{
	int i, n = 0;

	for (i = 0; i < RM_NBUF; i++)
		n += m->buf[i].used && m->buf[i].obj == o;
	return n;
}

int rm_obj_nstate(const struct rm *m, int o, int state)
{
	int i, n = 0;

	for (i = 0; i < RM_NBUF; i++)
		n += m->buf[i].used && m->buf[i].obj == o && m->buf[i].state == state;
	return n;
}

enum rm_get rm_charge_predict(const struct rm *m, int o, uint64_t len)
{
	enum rm_get r = RM_GET_FITS;
	int d;

	for (d = m->obj[o].dom; d >= 0; d = m->dom[d].parent) {
		uint64_t charged = rm_bytes(m, d, -1), evictable = rm_bytes(m, d, -2);
		uint64_t pinned = charged - rm_bytes(m, d, RM_CLEAN);
		uint64_t max = m->dom[d].max;

		/* Everything pinned could become clean and evictable; the
		 * clean referenced bytes stay. */
		if (len > max || charged - evictable - pinned > max - len)
			return RM_GET_HOPELESS;
		if (charged - evictable > max - len)
			r = RM_GET_RECLAIM;
	}
	return r;
}

enum rm_get rm_get_predict(const struct rm *m, int o, uint64_t off, uint64_t len, int *exists)
{
	int i;

	*exists = -1;
	for (i = 0; i < RM_NBUF; i++) {
		const struct rm_buf *b = &m->buf[i];

		if (!b->used || b->obj != o)
			continue;
		if (b->off == off && b->len == len) {
			*exists = i;
			return RM_GET_EXISTS;
		}
		if (b->off < off + len && off < b->off + b->len)
			return RM_GET_OVERLAP;
	}
	return rm_charge_predict(m, o, len);
}

int rm_buf_add(struct rm *m, int o, uint64_t off, uint64_t len, void *h)
{
	int i;

	for (i = 0; i < RM_NBUF; i++) {
		if (!m->buf[i].used) {
			m->buf[i] = (struct rm_buf){ .used = true,
						     .obj = o,
						     .off = off,
						     .len = len,
						     .state = RM_CLEAN,
						     .refs = 1,
						     .uid = m->next_uid++,
						     .h = h };
			return i;
		}
	}
	rm_fail(m, "no free buffer slot");
}

int rm_find(const struct rm *m, const void *h)
{
	int i;

	for (i = 0; i < RM_NBUF; i++)
		if (m->buf[i].used && m->buf[i].h == h)
			return i;
	return -1;
}

int rm_find_at(const struct rm *m, int o, uint64_t off)
{
	int i;

	for (i = 0; i < RM_NBUF; i++)
		if (m->buf[i].used && m->buf[i].obj == o && m->buf[i].off == off)
			return i;
	return -1;
}

void rm_dirty(struct rm *m, int i)
{
	struct rm_buf *b = &m->buf[i];

	RM_ASSERT(m, b->used && b->refs > 0, "dirtying buffer %d without a reference", i);
	b->ver++;
	b->lost = false;
	if (b->state == RM_WRITEBACK) {
		b->redirtied = true;
	} else {
		b->state = RM_DIRTY;
		b->seq = 0;
	}
}

void rm_flushed(struct rm *m, int i)
{
	struct rm_buf *b = &m->buf[i];

	RM_ASSERT(m, b->used, "flushed an unknown buffer");
	RM_ASSERT(m, b->state == RM_DIRTY, "buffer %d handed to flush in state %d", i, b->state);
	b->state = RM_WRITEBACK;
	b->redirtied = false;
	b->wver = b->ver;
	b->epoch = m->bk[m->obj[b->obj].bk].epoch;
}

void rm_flush_refused(struct rm *m, int i)
{
	struct rm_buf *b = &m->buf[i];

	RM_ASSERT(m, b->used && b->state == RM_WRITEBACK, "refused buffer %d not in writeback", i);
	b->state = RM_DIRTY;
	b->redirtied = false;
}

uint64_t rm_committed(const struct rm *m, int o)
{
	uint64_t a = m->bk[m->obj[o].bk].committed, b = m->obj[o].committed;

	return a > b ? a : b;
}

int rm_write_done(struct rm *m, int i, int result, uint64_t seq)
{
	struct rm_buf *b = &m->buf[i];
	int bk = m->obj[b->obj].bk;

	RM_ASSERT(m, b->used && b->state == RM_WRITEBACK, "completed buffer %d in state %d", i,
		  b->state);
	if (result == RM_ACK_UNSTABLE && b->epoch != m->bk[bk].epoch)
		b->state = RM_DIRTY; /* acknowledged by a server that restarted since */
	else if (b->redirtied || result == RM_ERROR)
		b->state = RM_DIRTY;
	else if (result == RM_ACK_UNSTABLE && seq > rm_committed(m, b->obj))
		b->state = RM_UNSTABLE;
	else
		b->state = RM_CLEAN;
	b->seq = b->state == RM_UNSTABLE ? seq : 0;
	b->redirtied = false;
	/* Declared lost: the data it held is gone, unless newer data waits. */
	if (result == RM_LOST && b->state == RM_CLEAN)
		b->lost = true;
	return b->state;
}

void rm_evicted(struct rm *m, int i)
{
	struct rm_buf *b = &m->buf[i];

	RM_ASSERT(m, b->used, "evicted an unknown buffer");
	RM_ASSERT(m, b->state == RM_CLEAN, "evicted buffer %d in state %d", i, b->state);
	RM_ASSERT(m, b->refs == 0, "evicted buffer %d with %d references", i, b->refs);
	b->used = false;
}

bool rm_drop_busy(const struct rm *m, int i)
{
	return m->buf[i].state == RM_WRITEBACK || m->buf[i].refs > 1;
}

void rm_dropped(struct rm *m, int i)
{
	RM_ASSERT(m, m->buf[i].used && m->buf[i].refs == 1, "bad drop");
	m->buf[i].used = false;
}

int rm_commit_done_bk(struct rm *m, int bk, uint64_t seq)
{
	int i, n = 0;

	for (i = 0; i < RM_NBUF; i++) {
		struct rm_buf *b = &m->buf[i];

		if (b->used && b->state == RM_UNSTABLE && m->obj[b->obj].bk == bk &&
		    b->seq <= seq) {
			b->state = RM_CLEAN;
			b->seq = 0;
			n++;
		}
	}
	if (seq > m->bk[bk].committed)
		m->bk[bk].committed = seq;
	return n;
}

int rm_commit_done_obj(struct rm *m, int o, uint64_t seq)
{
	int i, n = 0;

	for (i = 0; i < RM_NBUF; i++) {
		struct rm_buf *b = &m->buf[i];

		if (b->used && b->state == RM_UNSTABLE && b->obj == o && b->seq <= seq) {
			b->state = RM_CLEAN;
			b->seq = 0;
			n++;
		}
	}
	if (seq > m->obj[o].committed)
		m->obj[o].committed = seq;
	return n;
}

int rm_commit_lost(struct rm *m, int bk)
{
	int i, n = 0;

	for (i = 0; i < RM_NBUF; i++) {
		struct rm_buf *b = &m->buf[i];

		if (b->used && b->state == RM_UNSTABLE && m->obj[b->obj].bk == bk) {
			b->state = RM_DIRTY;
			b->seq = 0;
			n++;
		}
	}
	m->bk[bk].epoch++;
	m->bk[bk].committed = 0;
	for (i = 0; i < RM_NOBJ; i++)
		if (m->obj[i].used && m->obj[i].bk == bk)
			m->obj[i].committed = 0;
	return n;
}
