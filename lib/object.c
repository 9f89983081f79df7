/*
 * Backends and objects: creation, destruction, writeback errors.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

/* The size of the first release's ops struct: older callers pass it. */
#define US_BACKEND_OPS_V1 (offsetof(struct us_backend_ops, evict) + sizeof(void (*)(void)))

int us_backend_create(us_engine *e, const struct us_backend_ops *ops, void *ctx, us_backend **out)
{
	struct us_backend_ops o;
	us_backend *bk;

	if (!e || !ops || !out || ops->size < US_BACKEND_OPS_V1 || ops->size > sizeof(o))
		return -EINVAL;
	memset(&o, 0, sizeof(o));
	memcpy(&o, ops, ops->size);
	if (!o.flush || (!o.commit && !o.sync))
		return -EINVAL;
	us__lock(e);
	bk = us__meta_alloc(e, sizeof(*bk));
	if (!bk) {
		us__unlock(e);
		return -ENOMEM;
	}
	bk->engine = e;
	bk->ops = o;
	bk->ctx = ctx;
	us_list_init(&bk->objects);
	us_list_init(&bk->unstable_objs);
	us_list_init(&bk->wbs);
	us_list_init(&bk->dirty_wbs);
	us_list_init(&bk->flight_wbs);
	bk->max_inflight = 32u << 20;
	us_list_add_tail(&e->backends, &bk->link);
	us__unlock(e);
	*out = bk;
	return 0;
}

int us_backend_destroy(us_backend *bk)
{
	us_engine *e;

	if (!bk)
		return -EINVAL;
	e = bk->engine;
	us__lock(e);
	if (bk->nobjects) {
		us__unlock(e);
		return -EBUSY;
	}
	us_list_del(&bk->link);
	us__meta_free(e, bk, sizeof(*bk));
	us__unlock(e);
	return 0;
}

int us_backend_set_max_inflight(us_backend *bk, uint64_t bytes)
{
	if (!bk || !bytes)
		return -EINVAL;
	us__lock(bk->engine);
	bk->max_inflight = bytes;
	us__unlock(bk->engine);
	return 0;
}

#define US_BACKEND_STATS_V1 offsetof(struct us_backend_stats, commit_lat_ns)

int us_backend_stats(const us_backend *bk, struct us_backend_stats *st)
{
	struct us_backend_stats s;
	size_t sz;

	/* The first release's struct ended before commit_lat_ns: an older
	 * caller's is filled that far. */
	if (!bk || !st || (st->size != US_BACKEND_STATS_V1 && st->size < sizeof(s)))
		return -EINVAL;
	sz = st->size;
	memset(&s, 0, sizeof(s));
	us__lock(bk->engine);
	s.objects = bk->nobjects;
	s.dirty_bytes = bk->dirty;
	s.writeback_bytes = bk->writeback;
	s.unstable_bytes = bk->unstable;
	s.flush_calls = bk->flush_calls;
	s.flush_bytes = bk->flush_bytes;
	s.flush_failed = bk->flush_failed;
	s.commit_calls = bk->commit_calls;
	s.sync_calls = bk->sync_calls;
	s.commit_done = bk->commit_done_calls;
	s.commit_lost = bk->commit_lost_calls;
	s.last_committed_seq = bk->committed_seq;
	s.commit_failed = bk->commit_failed;
	if (bk->flush_bytes)
		s.commits_per_gib = (uint64_t)(((double)(bk->commit_calls + bk->sync_calls) *
						(double)(1ull << 30)) /
						       (double)bk->flush_bytes +
					       0.5);
	s.commit_lat_ns = bk->commit_lat_ns;
	s.write_lat_ns = bk->wlat_ns;
	s.link_bw = bk->wbw;
	us__unlock(bk->engine);
	s.size = sz;
	memcpy(st, &s, sz < sizeof(s) ? sz : sizeof(s));
	return 0;
}

int us_object_create(us_backend *bk, us_domain *d, void *user, us_object **out)
{
	us_engine *e;
	us_object *o;

	if (!bk || !out)
		return -EINVAL;
	e = bk->engine;
	if (!d)
		d = e->root;
	else if (d->engine != e)
		return -EINVAL;
	us__lock(e);
	o = us__meta_alloc(e, sizeof(*o));
	if (!o) {
		us__unlock(e);
		return -ENOMEM;
	}
	o->engine = e;
	o->backend = bk;
	o->domain = d;
	o->user = user;
	if (us__wb_attach(o)) {
		us__meta_free(e, o, sizeof(*o));
		us__unlock(e);
		return -ENOMEM;
	}
	us_list_init(&o->dirty_link);
	us_list_init(&o->rl_link);
	us_list_init(&o->unstable);
	us_list_init(&o->unstable_link);
	us_list_add_tail(&bk->objects, &o->link);
	bk->nobjects++;
	d->nobjects++;
	us__unlock(e);
	*out = o;
	return 0;
}

int us_object_destroy(us_object *o)
{
	struct us_list victims;
	us_engine *e;

	if (!o)
		return -EINVAL;
	e = o->engine;
	us_list_init(&victims);
	us__lock(e);
	for (;;) {
		if (o->busy || o->nlru != o->nbufs) {
			us__unlock(e);
			return -EBUSY;
		}
		if (!o->root)
			break;
		/*
		 * Every buffer is clean and unreferenced: evict them all. The
		 * object stays linked (so its backend and domain cannot be
		 * destroyed) until the evict callbacks have returned; one of
		 * them may even have created buffers again, so look again.
		 */
		while (o->root)
			us__buf_detach(us_container_of(o->root, us_buf, node), &victims);
		us__unlock(e);
		us__victims_release(e, &victims);
		us__lock(e);
	}
	us_list_del(&o->link);
	us__turn_leave(&o->gate);
	us__turn_leave(&o->room);
	if (!us_list_empty(&o->rl_link))
		o->wb->rl_nwriters--;
	us_list_del(&o->rl_link);
	us__wb_detach(o);
	o->backend->nobjects--;
	o->domain->nobjects--;
	us__unlock(e);
	us__meta_free(e, o, sizeof(*o));
	return 0;
}

void *us_object_user(const us_object *o)
{
	return o ? o->user : NULL;
}

us_domain *us_object_domain(const us_object *o)
{
	return o ? o->domain : NULL;
}

us_backend *us_object_backend(const us_object *o)
{
	return o ? o->backend : NULL;
}

uint64_t us_object_errseq(const us_object *o)
{
	uint64_t s;

	if (!o)
		return 0;
	us__lock(o->engine);
	s = o->errseq;
	us__unlock(o->engine);
	return s;
}

int us_object_check_error(us_object *o, uint64_t *since, int *err)
{
	int rc = 0;

	if (!o || !since || !err)
		return -EINVAL;
	us__lock(o->engine);
	if (*since != o->errseq) {
		*since = o->errseq;
		*err = o->err;
		rc = 1;
	}
	us__unlock(o->engine);
	return rc;
}

uint64_t us_object_bandwidth(const us_object *o)
{
	uint64_t bw;

	if (!o)
		return 0;
	us__lock(o->engine);
	bw = o->wb->bw;
	us__unlock(o->engine);
	return bw;
}
