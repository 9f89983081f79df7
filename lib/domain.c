/*
 * Domains: the API of the accounting tree (creation, limits, statistics)
 * and the table of their names. Their counters are counters.c's.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

#include <stdio.h>

static bool in_engine(const us_domain *d, const us_engine *e)
{
	return d && d->engine == e;
}

/*
 * THE NAME TABLE. Sibling names are unique (-EEXIST); with 10,000 children
 * under one parent a scan of the siblings made creating them all quadratic
 * (0.7 s). The engine keeps every domain but the root in one chained hash
 * table keyed by (parent, name), doubled when it holds more domains than
 * buckets. When doubling fails for want of memory the table stays as it is:
 * slower chains, never a wrong answer.
 */
static size_t name_hash(const us_domain *parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)parent;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return (size_t)(h ^ (h >> 29));
}

static us_domain **name_slot(us_engine *e, const us_domain *parent, const char *name)
{
	us_domain **p = &e->names[name_hash(parent, name) & (e->names_size - 1)];

	while (*p && ((*p)->parent != parent || strcmp((*p)->name, name) != 0))
		p = &(*p)->name_next;
	return p;
}

static void names_grow(us_engine *e)
{
	size_t size = e->names_size ? e->names_size * 2 : 64, i;
	us_domain **t;

	if (size / 2 > SIZE_MAX / sizeof(*t))
		return;
	t = us__meta_alloc(e, size * sizeof(*t));
	if (!t)
		return;
	for (i = 0; i < e->names_size; i++) {
		while (e->names[i]) {
			us_domain *d = e->names[i];
			size_t b = name_hash(d->parent, d->name) & (size - 1);

			e->names[i] = d->name_next;
			d->name_next = t[b];
			t[b] = d;
		}
	}
	us__meta_free(e, e->names, e->names_size * sizeof(*t));
	e->names = t;
	e->names_size = size;
}

void us__names_fini(us_engine *e)
{
	us__meta_free(e, e->names, e->names_size * sizeof(*e->names));
	e->names = NULL;
	e->names_size = e->ndomains = 0;
}

int us_domain_create(us_engine *e, us_domain *parent, const char *name, unsigned flags,
		     us_domain **out)
{
	us_domain *d, **slot;
	size_t len;

	if (!e || !name || !out || (flags & ~US_DOMAIN_ARENA))
		return -EINVAL;
	len = strnlen(name, US_NAME_MAX + 1);
	if (len == 0 || len > US_NAME_MAX)
		return -EINVAL;
	if (!parent)
		parent = e->root;
	else if (!in_engine(parent, e))
		return -EINVAL;

	us__lock(e);
	if (e->ndomains >= e->names_size)
		names_grow(e);
	if (!e->names) {
		us__unlock(e);
		return -ENOMEM;
	}
	slot = name_slot(e, parent, name);
	if (*slot) {
		us__unlock(e);
		return -EEXIST;
	}
	d = us__meta_alloc(e, sizeof(*d));
	if (!d) {
		us__unlock(e);
		return -ENOMEM;
	}
	us__domain_init(d, e, parent, name, US_UNLIMITED);
	/* Top-level domains and those that ask get an arena while any are left. */
	if ((parent == e->root || (flags & US_DOMAIN_ARENA)) && us__arena_create(e, &d->arena)) {
		d->has_arena = d->own_arena = true;
	} else {
		d->has_arena = parent->has_arena;
		d->arena = parent->arena;
	}
	us_list_add_tail(&parent->children, &d->sibling);
	if (d->own_arena && parent == e->root)
		us_list_add_tail(&e->arena_kids, &d->arena_link); /* I11 */
	parent->nchildren++;
	*slot = d; /* the chain's end: name_slot() walked to it */
	e->ndomains++;
	us__unlock(e);
	*out = d;
	return 0;
}

int us_domain_destroy(us_domain *d)
{
	us_engine *e;

	if (!d || !d->parent)
		return -EINVAL;
	e = d->engine;
	us__lock(e);
	if (d->nchildren || d->nobjects || d->c.charged || d->nsyncs) {
		us__unlock(e);
		return -EBUSY;
	}
	us__credit_revoke(d);
	us__tcache_forget_domain(e, d);
	us_list_del(&d->sibling);
	if (d->own_arena && d->parent == e->root)
		us_list_del(&d->arena_link);
	d->parent->nchildren--;
	*name_slot(e, d->parent, d->name) = d->name_next;
	e->ndomains--;
	us__pipe_forget(d); /* I10 */
	if (d->own_arena)
		us__arena_destroy(e, d->arena);
	us__meta_free(e, d, sizeof(*d));
	us__unlock(e);
	return 0;
}

const char *us_domain_name(const us_domain *d)
{
	return d ? d->name : NULL;
}

us_domain *us_domain_parent(const us_domain *d)
{
	return d ? d->parent : NULL;
}

int us_domain_set_limit(us_domain *d, enum us_limit which, uint64_t value)
{
	struct us_list victims;
	us_engine *e;
	int rc = 0;
	bool lowered = false;

	if (!d)
		return -EINVAL;
	switch (which) {
	case US_LIMIT_MAX:
	case US_LIMIT_HIGH:
		break;
	case US_LIMIT_DIRTY_BG_BYTES:
	case US_LIMIT_DIRTY_BYTES:
		if (value == 0)
			return -EINVAL;
		break;
	case US_LIMIT_DIRTY_BG_RATIO:
	case US_LIMIT_DIRTY_RATIO:
		if (value > 100)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	e = d->engine;
	us_list_init(&victims);
	us__lock(e);
	/* Thresholds move: lock-free credit granted under the old ones goes.
	 * The revoke walks the whole tree; with no credit out anywhere there
	 * is nothing to take back (setting the limits of 100,000 new domains
	 * one by one walked them all for each). */
	if (e->root->granted)
		us__credit_revoke(e->root);
	switch (which) {
	case US_LIMIT_MAX:
		/* Evict down to the new limit, or refuse without touching a thing. */
		if (d->c.charged > value) {
			if (d->c.charged - d->c.evictable > value) {
				rc = -EBUSY;
				break;
			}
			us__evict_to(d, value, &victims);
		}
		lowered = value < d->max;
		d->max = value;
		break;
	case US_LIMIT_HIGH:
		d->high = value;
		break;
	case US_LIMIT_DIRTY_BG_BYTES:
		d->bg_bytes = value;
		d->bg_ratio = 0;
		break;
	case US_LIMIT_DIRTY_BG_RATIO:
		d->bg_ratio = value;
		d->bg_bytes = 0;
		break;
	case US_LIMIT_DIRTY_BYTES:
		d->dirty_bytes = value;
		d->dirty_ratio = 0;
		break;
	case US_LIMIT_DIRTY_RATIO:
		d->dirty_ratio = value;
		d->dirty_bytes = 0;
		break;
	}
	us__unlock(e);
	/* A lower max gives the arenas' kept pages back (us__victims_release()). */
	if (lowered)
		us__victims_release_purge(e, &victims);
	else
		us__victims_release(e, &victims);
	return rc;
}

int us_domain_get_limit(const us_domain *d, enum us_limit which, uint64_t *value)
{
	us_engine *e;
	int rc = 0;

	if (!d || !value)
		return -EINVAL;
	e = d->engine;
	us__lock(e);
	switch (which) {
	case US_LIMIT_MAX:
		*value = d->max;
		break;
	case US_LIMIT_HIGH:
		*value = d->high;
		break;
	case US_LIMIT_DIRTY_BG_BYTES:
		*value = d->bg_bytes;
		break;
	case US_LIMIT_DIRTY_BG_RATIO:
		*value = d->bg_ratio;
		break;
	case US_LIMIT_DIRTY_BYTES:
		*value = d->dirty_bytes;
		break;
	case US_LIMIT_DIRTY_RATIO:
		*value = d->dirty_ratio;
		break;
	default:
		rc = -EINVAL;
	}
	us__unlock(e);
	return rc;
}

/*
 * A limit of d as it binds now: d's charged bytes plus the smallest room
 * left under that limit (max, or high) by d and every ancestor.
 */
static uint64_t bound(const us_domain *d, bool high)
{
	uint64_t h = US_UNLIMITED;
	const us_domain *a;

	for (a = d; a; a = a->parent) {
		uint64_t lim = high ? a->high : a->max;

		if (lim != US_UNLIMITED) {
			uint64_t room = lim > a->c.charged ? lim - a->c.charged : 0;

			if (room < h)
				h = room;
		}
	}
	return h == US_UNLIMITED ? US_UNLIMITED : d->c.charged + h;
}

int us_domain_effective_limits(const us_domain *d, struct us_domain_limits *out)
{
	struct us_domain_limits l;
	us_engine *e;
	size_t sz;

	if (!d || !out || out->size < sizeof(l))
		return -EINVAL;
	sz = out->size;
	e = d->engine;
	memset(&l, 0, sizeof(l));
	us__lock(e);
	l.max_bytes = bound(d, false);
	l.high_bytes = bound(d, true);
	if (l.high_bytes > l.max_bytes)
		l.high_bytes = l.max_bytes;
	us__domain_thresholds(d, &l.bg_thresh_bytes, &l.dirty_thresh_bytes);
	us__unlock(e);
	l.size = sz;
	memcpy(out, &l, sizeof(l));
	return 0;
}

#define US_DOMAIN_STATS_V1 offsetof(struct us_domain_stats, max_stall_ns)

int us_domain_stats(const us_domain *d, struct us_domain_stats *st)
{
	struct us_domain_stats s;
	us_engine *e;
	size_t sz;

	/* The first release's struct ended before max_stall_ns: an older
	 * caller's is filled that far. */
	if (!d || !st || (st->size != US_DOMAIN_STATS_V1 && st->size < sizeof(s)))
		return -EINVAL;
	sz = st->size;
	e = d->engine;
	memset(&s, 0, sizeof(s));
	us__lock(e);
	s.charged_bytes = d->c.charged;
	s.clean_bytes = d->c.clean;
	s.dirty_bytes = d->c.dirty;
	s.writeback_bytes = d->c.writeback;
	s.unstable_bytes = d->c.unstable;
	s.evictable_bytes = d->c.evictable;
	s.peak_charged_bytes = d->peak_charged;
	s.peak_pinned_bytes = d->peak_pinned;
	s.buffers = d->c.buffers;
	s.charges = d->ev[US_EV_CHARGES];
	s.uncharges = d->ev[US_EV_UNCHARGES];
	s.evictions = d->ev[US_EV_EVICTIONS];
	s.evicted_bytes = d->ev[US_EV_EVICTED_BYTES];
	s.drops = d->ev[US_EV_DROPS];
	s.dropped_bytes = d->ev[US_EV_DROPPED_BYTES];
	s.enomem = d->ev[US_EV_ENOMEM];
	s.max_events = d->ev[US_EV_MAX_EVENTS];
	s.high_events = d->ev[US_EV_HIGH_EVENTS];
	s.dirtied = d->ev[US_EV_DIRTIED];
	s.redirtied = d->ev[US_EV_REDIRTIED];
	s.writeback_started = d->ev[US_EV_WRITEBACK_STARTED];
	s.written_stable = d->ev[US_EV_WRITTEN_STABLE];
	s.written_unstable = d->ev[US_EV_WRITTEN_UNSTABLE];
	s.write_errors = d->ev[US_EV_WRITE_ERRORS];
	s.write_lost = d->ev[US_EV_WRITE_LOST];
	s.committed = d->ev[US_EV_COMMITTED];
	s.commit_lost = d->ev[US_EV_COMMIT_LOST];
	s.paused = d->ev[US_EV_PAUSED];
	s.pause_ns = d->ev[US_EV_PAUSE_NS];
	s.max_pause_ns = d->max_pause_seen_ns;
	s.over_limit = d->ev[US_EV_OVER_LIMIT];
	s.bg_flushed = d->ev[US_EV_BG_FLUSHED];
	s.expired_flushed = d->ev[US_EV_EXPIRED_FLUSHED];
	s.reclaims = d->ev[US_EV_RECLAIMS];
	s.high_delay_ns = d->ev[US_EV_HIGH_DELAY_NS];
	s.max_stall_ns = d->max_stall_seen_ns;
	us__unlock(e);
	s.size = sz;
	memcpy(st, &s, sz < sizeof(s) ? sz : sizeof(s));
	return 0;
}

/* One "key value" line per field of us_domain_stats and of the effective
 * limits, in the struct's order: every field, so that a new one is seen. */
#define STAT_FIELDS(X)                            \
	X(charged, s.charged_bytes)               \
	X(clean, s.clean_bytes)                   \
	X(dirty, s.dirty_bytes)                   \
	X(writeback, s.writeback_bytes)           \
	X(unstable, s.unstable_bytes)             \
	X(evictable, s.evictable_bytes)           \
	X(peak_charged, s.peak_charged_bytes)     \
	X(peak_pinned, s.peak_pinned_bytes)       \
	X(buffers, s.buffers)                     \
	X(max, l.max_bytes)                       \
	X(high, l.high_bytes)                     \
	X(bg_thresh, l.bg_thresh_bytes)           \
	X(dirty_thresh, l.dirty_thresh_bytes)     \
	X(charges, s.charges)                     \
	X(uncharges, s.uncharges)                 \
	X(evictions, s.evictions)                 \
	X(evicted_bytes, s.evicted_bytes)         \
	X(drops, s.drops)                         \
	X(dropped_bytes, s.dropped_bytes)         \
	X(enomem, s.enomem)                       \
	X(max_events, s.max_events)               \
	X(high_events, s.high_events)             \
	X(dirtied, s.dirtied)                     \
	X(redirtied, s.redirtied)                 \
	X(writeback_started, s.writeback_started) \
	X(written_stable, s.written_stable)       \
	X(written_unstable, s.written_unstable)   \
	X(write_errors, s.write_errors)           \
	X(write_lost, s.write_lost)               \
	X(committed, s.committed)                 \
	X(commit_lost, s.commit_lost)             \
	X(paused, s.paused)                       \
	X(pause_ns, s.pause_ns)                   \
	X(max_pause_ns, s.max_pause_ns)           \
	X(over_limit, s.over_limit)               \
	X(bg_flushed, s.bg_flushed)               \
	X(expired_flushed, s.expired_flushed)     \
	X(reclaims, s.reclaims)                   \
	X(high_delay_ns, s.high_delay_ns)         \
	X(max_stall_ns, s.max_stall_ns)

int us_domain_stat_text(const us_domain *d, char *buf, size_t len)
{
	struct us_domain_stats s = { .size = sizeof(s) };
	struct us_domain_limits l = { .size = sizeof(l) };
	size_t at = 0;
	int rc;

	if (!d || (!buf && len))
		return -EINVAL;
	rc = us_domain_stats(d, &s);
	if (rc == 0)
		rc = us_domain_effective_limits(d, &l);
	if (rc)
		return rc;
	if (len)
		buf[0] = '\0';
#define X(name, value)                                                                      \
	rc = snprintf(at < len ? buf + at : NULL, at < len ? len - at : 0, #name " %llu\n", \
		      (unsigned long long)(value));                                         \
	if (rc < 0)                                                                         \
		return -EINVAL;                                                             \
	at += (size_t)rc;
	STAT_FIELDS(X)
#undef X
	return at > INT32_MAX ? -EINVAL : (int)at;
}

int us_domain_purge(us_domain *d)
{
	us_engine *e;
	bool has;
	unsigned ind;

	if (!d)
		return -EINVAL;
	e = d->engine;
	us__lock(e);
	has = d->has_arena;
	ind = d->arena;
	us__unlock(e);
	/* Purging walks the arena's extents: done without the engine lock. */
	if (has)
		us__arena_purge(e, ind);
	return 0;
}
