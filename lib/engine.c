/*
 * The engine: options, lock, clock, lifetime.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

const char *us_version(void)
{
	return US_VERSION_STRING;
}

const char *us_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case -EINVAL:
		return "invalid argument";
	case -ENOMEM:
		return "out of memory: the charge cannot fit under a limit";
	case -EAGAIN:
		return "try again later";
	case -EBUSY:
		return "still in use";
	case -EEXIST:
		return "overlaps an existing buffer or name";
	case -ENOENT:
		return "not found";
	case -EALREADY:
		return "not in the state this call completes";
	case -EDEADLK:
		return "would deadlock";
	case -EIO:
		return "input/output error";
	case -EUCLEAN:
		return "invariant violated";
	case -ESTALE:
		return "a report of a server instance that is gone";
	default:
		return "unknown error";
	}
}

/* Engine ids, never reused: a thread's cache slot names its engine by id. */
static _Atomic uint64_t engine_ids;

static uint64_t physical_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || psz <= 0)
		return (uint64_t)1 << 32;
	return (uint64_t)pages * (uint64_t)psz;
}

void us_engine_options_init(struct us_engine_options *opts)
{
	if (!opts)
		return;
	memset(opts, 0, sizeof(*opts));
	opts->size = sizeof(*opts);
	opts->memory_bytes = physical_memory();
	opts->clock = US_CLOCK_MONOTONIC;
	opts->max_arenas = 8;
}

/* The size of the first release's options struct: older callers pass it. */
#define US_ENGINE_OPTIONS_V1 (offsetof(struct us_engine_options, max_arenas) + sizeof(unsigned))

int us_engine_create(const struct us_engine_options *user, us_engine **out)
{
	struct us_engine_options o;
	pthread_mutexattr_t attr;
	us_engine boot, *e;
	us_domain *root;

	if (!out)
		return -EINVAL;
	us_engine_options_init(&o);
	if (user) {
		if (user->size < US_ENGINE_OPTIONS_V1 || user->size > sizeof(o))
			return -EINVAL;
		memcpy(&o, user, user->size);
		o.size = sizeof(o);
	}
	if (o.memory_bytes == 0)
		return -EINVAL;
	if (o.clock != US_CLOCK_MONOTONIC && o.clock != US_CLOCK_VIRTUAL &&
	    o.clock != US_CLOCK_CUSTOM)
		return -EINVAL;
	if (o.clock == US_CLOCK_CUSTOM && !o.clock_fn)
		return -EINVAL;
	if (o.alloc && (!o.alloc->alloc || !o.alloc->free))
		return -EINVAL;
	if (o.max_arenas == 0)
		o.max_arenas = 8;
	if (o.flusher_threads > 64 || o.hugepages > 1)
		return -EINVAL;

	/* Allocate through the hooks from the start: a bootstrap engine. */
	memset(&boot, 0, sizeof(boot));
	if (o.alloc) {
		boot.have_hooks = true;
		boot.hooks = *o.alloc;
	}
	e = us__meta_alloc(&boot, sizeof(*e));
	if (!e)
		return -ENOMEM;
	root = us__meta_alloc(&boot, sizeof(*root));
	if (!root) {
		us__meta_free(&boot, e, sizeof(*e));
		return -ENOMEM;
	}
	pthread_mutexattr_init(&attr);
#ifndef NDEBUG
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
#endif
	pthread_mutex_init(&e->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	e->clock = o.clock;
	e->clock_fn = o.clock_fn;
	e->clock_ctx = o.clock_ctx;
	atomic_init(&e->vclock_ns, 0);
	e->have_hooks = boot.have_hooks;
	e->hooks = boot.hooks;
	e->max_arenas = o.max_arenas;
	e->hugepages = o.hugepages;
	us_list_init(&e->backends);
	us_list_init(&e->tcaches);
	us_list_init(&e->syncs);
	us_list_init(&e->wb_samples);
	us_list_init(&e->pipe_decay);
	us_list_init(&e->arena_kids);
	e->lru_tick = e->lru_low = (uint64_t)1 << 62;
	e->id = atomic_fetch_add(&engine_ids, 1) + 1;
	e->dirty_expire_ns = 30 * US_SEC;
	e->writeback_interval_ns = 5 * US_SEC;
	e->max_pause_ns = 200 * US_MSEC;
	e->min_pause_ns = 10 * US_MSEC;
	e->max_flush_bytes = 4u << 20;
	e->bw_interval_ns = 200 * US_MSEC;
	e->bw_period_ns = 3 * US_SEC;
	e->init_bw = 100u << 20;
	e->force_commit = 1;
	e->commit_interval_ns = 30 * US_SEC;
	e->max_commits = 4;
	e->reclaim_wait_ns = 100 * US_MSEC;
	e->reclaim_retries = 16;
	e->reclaim_timeout_ns = 60 * US_SEC;
	e->next_expiry_ns = us__now(e) + e->writeback_interval_ns;

	us__domain_init(root, e, NULL, "root", o.memory_bytes);
	root->has_arena = root->own_arena = us__arena_create(e, &root->arena);
	e->root = root;
	if (us__threads_start(e, o.flusher_threads)) {
		us__threads_fini(e);
		if (root->own_arena)
			us__arena_destroy(e, root->arena);
		pthread_mutex_destroy(&e->lock);
		us__meta_free(&boot, root, sizeof(*root));
		us__meta_free(&boot, e, sizeof(*e));
		return -ENOMEM;
	}
	*out = e;
	return 0;
}

us_domain *us_engine_root(us_engine *e)
{
	return e ? e->root : NULL;
}

static uint64_t *param(us_engine *e, enum us_param p)
{
	switch (p) {
	case US_PARAM_DIRTY_EXPIRE_NS:
		return &e->dirty_expire_ns;
	case US_PARAM_WRITEBACK_INTERVAL_NS:
		return &e->writeback_interval_ns;
	case US_PARAM_MAX_PAUSE_NS:
		return &e->max_pause_ns;
	case US_PARAM_MIN_PAUSE_NS:
		return &e->min_pause_ns;
	case US_PARAM_MAX_FLUSH_BYTES:
		return &e->max_flush_bytes;
	case US_PARAM_BW_INTERVAL_NS:
		return &e->bw_interval_ns;
	case US_PARAM_BW_PERIOD_NS:
		return &e->bw_period_ns;
	case US_PARAM_INIT_BW:
		return &e->init_bw;
	case US_PARAM_FORCE_COMMIT:
		return &e->force_commit;
	case US_PARAM_COMMIT_INTERVAL_NS:
		return &e->commit_interval_ns;
	case US_PARAM_MAX_COMMITS:
		return &e->max_commits;
	case US_PARAM_RECLAIM_WAIT_NS:
		return &e->reclaim_wait_ns;
	case US_PARAM_RECLAIM_RETRIES:
		return &e->reclaim_retries;
	case US_PARAM_RECLAIM_TIMEOUT_NS:
		return &e->reclaim_timeout_ns;
	default:
		return NULL;
	}
}

int us_engine_set_param(us_engine *e, enum us_param p, uint64_t value)
{
	uint64_t *v;

	if (!e || !(v = param(e, p)) ||
	    (value == 0 && p != US_PARAM_MIN_PAUSE_NS && p != US_PARAM_FORCE_COMMIT) ||
	    (p == US_PARAM_FORCE_COMMIT && value > 1))
		return -EINVAL;
	us__lock(e);
	*v = value;
	if (p == US_PARAM_WRITEBACK_INTERVAL_NS && e->next_expiry_ns > us__now(e) + value)
		e->next_expiry_ns = us__now(e) + value;
	us__unlock(e);
	return 0;
}

int us_engine_get_param(us_engine *e, enum us_param p, uint64_t *value)
{
	uint64_t *v;

	if (!e || !value || !(v = param(e, p)))
		return -EINVAL;
	us__lock(e);
	*value = *v;
	us__unlock(e);
	return 0;
}

static void domain_free_all(us_engine *e, us_domain *d)
{
	while (!us_list_empty(&d->children)) {
		us_domain *c = us_container_of(d->children.next, us_domain, sibling);

		us_list_del(&c->sibling);
		domain_free_all(e, c);
	}
	if (d->own_arena)
		us__arena_destroy(e, d->arena);
	us__meta_free(e, d, sizeof(*d));
}

int us_engine_destroy(us_engine *e)
{
	struct us_list victims, *pos, *opos;

	if (!e)
		return -EINVAL;
	if (us__in_callback(e))
		return -EDEADLK; /* it would free what the callback's caller uses */
	us_list_init(&victims);
	us__lock(e);
	/* Everything charged must be evictable, no callback running, no sync. */
	if (e->root->c.charged != e->root->c.evictable || !us_list_empty(&e->syncs)) {
		us__unlock(e);
		return -EBUSY;
	}
	us_list_for_each (pos, &e->backends) {
		us_backend *b = us_container_of(pos, us_backend, link);

		us_list_for_each (opos, &b->objects) {
			if (us_container_of(opos, us_object, link)->busy) {
				us__unlock(e);
				return -EBUSY;
			}
		}
	}
	us__evict_to(e->root, 0, &victims);
	us__unlock(e);
	us__threads_stop(e);
	us__victims_release(e, &victims);
	us__tcache_engine_fini(e);

	while (!us_list_empty(&e->backends)) {
		us_backend *b = us_container_of(e->backends.next, us_backend, link);

		while (!us_list_empty(&b->objects)) {
			us_object *o = us_container_of(b->objects.next, us_object, link);

			us_list_del(&o->link);
			us__meta_free(e, o, sizeof(*o));
		}
		while (!us_list_empty(&b->wbs)) {
			struct us_wb *wb = us_container_of(b->wbs.next, struct us_wb, bk_link);

			us_list_del(&wb->bk_link);
			us__meta_free(e, wb, sizeof(*wb));
		}
		us_list_del(&b->link);
		us__meta_free(e, b, sizeof(*b));
	}
	domain_free_all(e, e->root);
	us__names_fini(e);
	us__threads_fini(e);
	pthread_mutex_destroy(&e->lock);
	/* The engine record itself goes back through the same hooks. */
	{
		us_engine boot;

		memset(&boot, 0, sizeof(boot));
		boot.have_hooks = e->have_hooks;
		boot.hooks = e->hooks;
		us__meta_free(&boot, e, sizeof(*e));
	}
	return 0;
}

/*
 * Whether destroying can succeed by waiting: no sync exists and everything
 * is clean and unreferenced, or some object is busy (a flush or commit call
 * still returning on another thread, a commit request or an eviction being
 * finished): those end by themselves, and a flush call's buffers, clean
 * once it has completed them inside the call, stay pinned until it returns.
 * If one is busy, this waits for the last busy count to drop (it kicks the
 * idle_waiters), or 10 ms. A sync the host keeps, or data not clean or held
 * with nothing busy, does not end by itself, and makes this false.
 */
static bool settle(us_engine *e)
{
	struct us_list *pos, *opos;
	bool busy = false;

	us__lock(e);
	us_list_for_each (pos, &e->backends) {
		us_backend *b = us_container_of(pos, us_backend, link);

		us_list_for_each (opos, &b->objects)
			busy |= us_container_of(opos, us_object, link)->busy != 0;
	}
	if (!us_list_empty(&e->syncs) || (!busy && e->root->c.charged != e->root->c.evictable)) {
		us__unlock(e);
		return false;
	}
	e->idle_waiters += busy;
	us__unlock(e);
	if (busy) {
		us__wait_progress(e, 10 * US_MSEC);
		us__lock(e);
		e->idle_waiters--;
		us__unlock(e);
	}
	return true;
}

int us_engine_shutdown(us_engine *e)
{
	int rc;

	if (!e)
		return -EINVAL;
	if (us__in_callback(e))
		return -EDEADLK;
	if (!e->shutdown) {
		rc = us__sync_start(e, NULL, e->root, US_REASON_SHUTDOWN, NULL, NULL, &e->shutdown);
		if (rc)
			return rc;
	}
	if (e->nthreads)
		us__sync_wait(e, e->shutdown);
	else if (us_sync_done(e->shutdown) != 1)
		return -EBUSY; /* polled mode: poll, and call again */
	us_sync_free(e->shutdown);
	e->shutdown = NULL;
	rc = us_engine_destroy(e);
	/* Threaded: the last completions can come from inside a callback that
	 * has not returned yet (a flusher thread finishing a flush or commit
	 * call); wait for it rather than fail. */
	while (rc == -EBUSY && e->nthreads && settle(e))
		rc = us_engine_destroy(e);
	return rc;
}
