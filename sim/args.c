/*
 * unstable-sim: the command line's values. Sizes take K/M/G/T/P (powers of
 * 1024), rates SIZE/s, times ns/us/ms/s. A value is a decimal number with an
 * optional fraction, within the bounds of its kind and key (sim.h says why
 * each): "nan", "inf", "-1", "1e18" and "100P" are errors, never values that
 * a cast turns into something else. Every error names the option, its
 * argument and the key that was wrong.
 *
 * SPDX-License-Identifier: MIT
 */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MSG(...) (snprintf(err, len, __VA_ARGS__), -1)

static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

/*
 * The number at the start of s: digits, then perhaps a '.' and more
 * digits ("1", "2.5"). Its value and where it ends, or -1 with a message.
 * strtod() alone would also take a sign, an exponent, hexadecimal, "nan"
 * and "inf", so it only reads what this scan accepted.
 */
static int number(const char *s, double *v, const char **end, char *err, size_t len)
{
	const char *p = s;
	char buf[64];

	if (!*s)
		return MSG("empty value");
	if (*s == '-')
		return MSG("'%s' is negative", s);
	if (!strncasecmp(s, "nan", 3) || !strncasecmp(s, "inf", 3) || !strncasecmp(s, "+inf", 4))
		return MSG("'%s' is not a finite number", s);
	if (!digit(*p))
		return MSG("'%s' is not a number", s);
	while (digit(*p))
		p++;
	if (*p == '.') {
		if (!digit(p[1]))
			return MSG("'%s' is not a number: digits must follow the '.'", s);
		for (p++; digit(*p); p++)
			;
	}
	if ((*p == 'e' || *p == 'E') && (digit(p[1]) || p[1] == '-' || p[1] == '+'))
		return MSG("'%s' has an exponent: write the number with a unit instead", s);
	if ((size_t)(p - s) >= sizeof(buf))
		return MSG("'%.20s...' has too many digits", s);
	memcpy(buf, s, (size_t)(p - s));
	buf[p - s] = '\0';
	*v = strtod(buf, NULL);
	*end = p;
	return 0;
}

const char *sim_size_str(uint64_t v, char *buf, size_t n)
{
	static const char units[] = "KMGTP";
	int u = -1;

	while (u < 4 && v && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, n, "%llu", (unsigned long long)v);
	else
		snprintf(buf, n, "%llu%c", (unsigned long long)v, units[u]);
	return buf;
}

int sim_parse_size(const char *s, uint64_t *out, char *err, size_t len)
{
	static const char units[] = "KMGTP";
	const char *e, *u;
	double v, m = 1;

	if (number(s, &v, &e, err, len))
		return -1;
	if (*e && (u = strchr(units, *e)) != NULL) {
		for (m = 1024; u > units; u--)
			m *= 1024;
		e++;
		if (*e == 'i' && e[1] == 'B')
			e += 2;
	}
	if (*e == 'B')
		e++;
	if (*e)
		return MSG("'%s': unknown unit '%s' (a size takes K, M, G, T or P)", s, e);
	v *= m;
	if (v > (double)SIM_SIZE_MAX)
		return MSG("'%s' is more than 1P", s);
	*out = (uint64_t)v;
	return 0;
}

int sim_parse_time(const char *s, uint64_t *out, char *err, size_t len)
{
	const char *e;
	double v, m;

	if (number(s, &v, &e, err, len))
		return -1;
	if (!strcmp(e, "ns"))
		m = 1;
	else if (!strcmp(e, "us"))
		m = 1e3;
	else if (!strcmp(e, "ms"))
		m = 1e6;
	else if (!strcmp(e, "s"))
		m = 1e9;
	else if (!*e)
		return MSG("'%s' has no unit (a time takes ns, us, ms or s)", s);
	else
		return MSG("'%s': unknown unit '%s' (a time takes ns, us, ms or s)", s, e);
	v *= m;
	if (v > (double)SIM_TIME_MAX)
		return MSG("'%s' is more than 1 hour", s);
	*out = (uint64_t)v;
	return 0;
}

int sim_parse_rate(const char *s, uint64_t *out, char *err, size_t len)
{
	char buf[64];
	size_t n = strlen(s);

	if (n < 3 || n >= sizeof(buf) || strcmp(s + n - 2, "/s"))
		return MSG("'%s' is not a rate: SIZE/s, like 2G/s", s);
	memcpy(buf, s, n - 2);
	buf[n - 2] = 0;
	if (sim_parse_size(buf, out, err, len))
		return -1;
	if (*out < SIM_RATE_MIN || *out > SIM_RATE_MAX)
		return MSG("'%s' is out of range: 1K/s to 1T/s", s);
	return 0;
}

int sim_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out, char *err, size_t len)
{
	const char *p;
	unsigned long long v;

	if (!*s)
		return MSG("empty value");
	if (*s == '-')
		return MSG("'%s' is negative", s);
	for (p = s; digit(*p); p++)
		;
	if (*p)
		return MSG("'%s' is not a whole number", s);
	errno = 0;
	v = strtoull(s, NULL, 10);
	if (errno || v < lo || v > hi)
		return MSG("'%s' is out of range: %llu to %llu", s, (unsigned long long)lo,
			   (unsigned long long)hi);
	*out = v;
	return 0;
}

/* A size of key within [lo, hi] (SIM_SIZE_MAX at most): 0, or -1. */
static int size_in(const char *s, uint64_t lo, uint64_t hi, uint64_t *out, char *err, size_t len)
{
	char a[32], b[32];
	uint64_t v;

	if (sim_parse_size(s, &v, err, len))
		return -1;
	if (v < lo || v > hi)
		return MSG("'%s' is out of range: %s to %s", s, sim_size_str(lo, a, sizeof(a)),
			   sim_size_str(hi, b, sizeof(b)));
	*out = v;
	return 0;
}

/* Puts "OPT SPEC: KEY: " before the message in err, or "OPT: " when the
 * option's argument is the value itself (spec NULL); returns -1. */
static int keyed(const char *opt, const char *spec, const char *key, char *err, size_t len)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "%s", err);
	if (!spec)
		return MSG("%s: %s", opt, msg);
	return MSG("%s %s: %s: %s", opt, spec, key, msg);
}

int sim_parse_memory(const char *s, struct sim_config *c, char *err, size_t len)
{
	if (size_in(s, SIM_MEMORY_MIN, SIM_SIZE_MAX, &c->memory, err, len))
		return keyed("--memory", NULL, NULL, err, len);
	return 0;
}

int sim_parse_seed(const char *s, struct sim_config *c, char *err, size_t len)
{
	if (sim_parse_uint(s, 0, UINT64_MAX, &c->seed, err, len))
		return keyed("--seed", NULL, NULL, err, len);
	return 0;
}

/* Splits "k=v,k=v" into its next key and value; returns 0 at the end. */
static int next_kv(char **p, char **k, char **v)
{
	char *s = *p, *c;

	if (!s || !*s)
		return 0;
	c = strchr(s, ',');
	if (c) {
		*c = 0;
		*p = c + 1;
	} else {
		*p = NULL;
	}
	*k = s;
	*v = strchr(s, '=');
	if (*v)
		*(*v)++ = 0;
	return 1;
}

/* TIME, or TIME+RATE: a commit takes TIME and its uncommitted bytes / RATE. */
static int commit_lat(const char *v, struct sim_backend *b, char *err, size_t len)
{
	char buf[128], *plus;
	uint64_t lat, bps = 0;

	if (strlen(v) >= sizeof(buf))
		return MSG("'%s' is too long", v);
	strcpy(buf, v);
	plus = strchr(buf, '+');
	if (plus)
		*plus++ = 0;
	if (sim_parse_time(buf, &lat, err, len) || (plus && sim_parse_rate(plus, &bps, err, len))) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s", err);
		return MSG("%s; commit-lat is TIME or TIME+RATE (a disk speed), like 5ms+500M/s",
			   msg);
	}
	b->commit_lat = lat;
	b->commit_bps = bps;
	return 0;
}

/* The KEY=VALUE,... of --backend ARG into b (kvs: ARG, or what follows
 * its NAME:). */
static int parse_backend(const char *arg, const char *kvs, struct sim_backend *b, char *err,
			 size_t len)
{
	char buf[512], *p = buf, *k, *v;

	if (strlen(kvs) >= sizeof(buf))
		return MSG("--backend: too long");
	strcpy(buf, kvs);
	while (next_kv(&p, &k, &v)) {
		uint64_t n;
		int rc;

		if (!v)
			return MSG("--backend %s: '%s' needs a value (key=value)", arg, k);
		if (!strcmp(k, "bw"))
			rc = sim_parse_rate(v, &b->bw, err, len);
		else if (!strcmp(k, "lat"))
			rc = sim_parse_time(v, &b->lat_ns, err, len);
		else if (!strcmp(k, "rpcs")) {
			rc = sim_parse_uint(v, 1, SIM_RPCS_MAX, &n, err, len);
			b->rpcs = rc ? b->rpcs : n;
		} else if (!strcmp(k, "rpc"))
			rc = size_in(v, 1, SIM_BLOCK_MAX, &b->rpc, err, len);
		else if (!strcmp(k, "commit-interval")) {
			rc = sim_parse_time(v, &n, err, len);
			if (!rc && n < SIM_INTERVAL_MIN)
				rc = MSG("'%s' is less than 1ms", v);
			b->commit_interval = rc ? b->commit_interval : n;
		} else if (!strcmp(k, "commit-lat"))
			rc = commit_lat(v, b, err, len);
		else if (!strcmp(k, "journal"))
			rc = sim_parse_size(v, &b->journal, err, len);
		else
			return MSG("--backend %s: unknown key '%s'", arg, k);
		if (rc)
			return keyed("--backend", arg, k, err, len);
	}
	return 0;
}

int sim_parse_backend(const char *spec, struct sim_backend *b, char *err, size_t len)
{
	return parse_backend(spec, spec, b, err, len);
}

/*
 * The names of the config's domains, groups and backends in one hash table
 * (open addressing), so that a lookup costs O(1) and parsing N domains
 * O(N). Entries are indexed lazily, at the next lookup: those the parsers
 * add and those a caller filled in directly alike. Without memory for it,
 * the lookups fall back to a linear search.
 */
enum { NAME_DOM = 0, NAME_GRP = 1, NAME_BK = 2 };

struct sim_name_index {
	uint32_t *slot; /* 0: empty; else 1 + (index << 2 | kind) */
	size_t cap, n;
	int ndom, ngrp, nbk; /* how many of each are indexed */
};

static const char *entry_name(const struct sim_config *c, uint32_t e)
{
	uint32_t kind = (e - 1) & 3, i = (e - 1) >> 2;

	return kind == NAME_DOM ? c->dom[i].name :
	       kind == NAME_GRP ? c->grp[i].name :
				  c->bk[i].name;
}

static size_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return (size_t)(h ^ h >> 29);
}

/* The index of the name of that kind, or -1. */
static int index_find(const struct sim_config *c, const struct sim_name_index *x, int kind,
		      const char *name)
{
	size_t m = x->cap - 1, h = name_hash(name) & m;

	if (!x->cap)
		return -1;
	for (; x->slot[h]; h = (h + 1) & m) {
		uint32_t e = x->slot[h];

		if ((int)((e - 1) & 3) == kind && !strcmp(entry_name(c, e), name))
			return (int)((e - 1) >> 2);
	}
	return -1;
}

static int index_add(struct sim_config *c, int kind, int i)
{
	struct sim_name_index *x = c->names;
	uint32_t e = ((uint32_t)i << 2 | (uint32_t)kind) + 1;
	size_t m, h;

	if (2 * (x->n + 1) > x->cap) {
		size_t cap = x->cap ? 2 * x->cap : 64, k;
		uint32_t *old = x->slot, *v = calloc(cap, sizeof(*v));

		if (!v)
			return -1;
		for (k = 0; k < x->cap; k++)
			if (old[k]) {
				for (h = name_hash(entry_name(c, old[k])) & (cap - 1); v[h];
				     h = (h + 1) & (cap - 1))
					;
				v[h] = old[k];
			}
		free(old);
		x->slot = v;
		x->cap = cap;
	}
	if (index_find(c, x, kind, entry_name(c, e)) >= 0)
		return 0; /* the first of a name given twice stays */
	m = x->cap - 1;
	for (h = name_hash(entry_name(c, e)) & m; x->slot[h]; h = (h + 1) & m)
		;
	x->slot[h] = e;
	x->n++;
	return 0;
}

/* Indexes the entries added since the last lookup: 0, or -1 without memory. */
static int index_sync(const struct sim_config *cc)
{
	struct sim_config *c = (struct sim_config *)cc; /* the index is a cache */
	struct sim_name_index *x = c->names;

	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x)
			return -1;
		c->names = x;
	}
	if (x->ndom > c->ndom || x->ngrp > c->ngrp || x->nbk > c->nbk) {
		/* Entries went away (a failed group): index again. */
		free(x->slot);
		memset(x, 0, sizeof(*x));
	}
	for (; x->ndom < c->ndom; x->ndom++)
		if (index_add(c, NAME_DOM, x->ndom))
			return -1;
	for (; x->ngrp < c->ngrp; x->ngrp++)
		if (index_add(c, NAME_GRP, x->ngrp))
			return -1;
	for (; x->nbk < c->nbk; x->nbk++)
		if (index_add(c, NAME_BK, x->nbk))
			return -1;
	return 0;
}

static int find_name(const struct sim_config *c, int kind, const char *name)
{
	int i, n = kind == NAME_DOM ? c->ndom : kind == NAME_GRP ? c->ngrp : c->nbk;

	if (index_sync(c) == 0)
		return index_find(c, c->names, kind, name);
	for (i = 0; i < n; i++) /* no memory for the index */
		if (!strcmp(entry_name(c, ((uint32_t)i << 2 | (uint32_t)kind) + 1), name))
			return i;
	return -1;
}

static int find_domain(const struct sim_config *c, const char *name)
{
	return find_name(c, NAME_DOM, name);
}

/* A backend's index as struct sim_config counts them (0: the default,
 * also called "default"), or -1. */
static int find_backend(const struct sim_config *c, const char *name)
{
	int i;

	if (!strcmp(name, "default"))
		return 0;
	i = find_name(c, NAME_BK, name);
	return i < 0 ? -1 : i + 1;
}

/*
 * SIZE or PCT%: bytes, or a percentage of the domain's limit. 0 and 0% are
 * both a ratio of 0 (*zero): the engine refuses a threshold of 0 bytes and
 * takes a ratio of 0 (a dirty ratio of 0 is write-through), and nothing
 * can be dirty below a threshold of 0 bytes either.
 */
static int size_or_pct(const char *v, uint64_t *bytes, unsigned *pct, bool *zero, char *err,
		       size_t len)
{
	size_t n = strlen(v);
	uint64_t x;

	if (n && v[n - 1] == '%') {
		char buf[16];

		if (n >= sizeof(buf))
			return MSG("'%s' is not a percentage from 0%% to 100%%", v);
		memcpy(buf, v, n - 1);
		buf[n - 1] = '\0';
		if (sim_parse_uint(buf, 0, 100, &x, err, len))
			return MSG("'%s' is not a percentage from 0%% to 100%%", v);
		*pct = (unsigned)x;
		*bytes = 0;
	} else {
		if (sim_parse_size(v, &x, err, len))
			return -1;
		*pct = 0;
		*bytes = x;
	}
	*zero = !*pct && !*bytes;
	return 0;
}

/* A count=N: 1 to SIM_COUNT_MAX. */
static int parse_count(const char *v, int *out, char *err, size_t len)
{
	uint64_t n;

	if (sim_parse_uint(v, 1, SIM_COUNT_MAX, &n, err, len))
		return -1;
	*out = (int)n;
	return 0;
}

static int find_group(const struct sim_config *c, const char *name)
{
	return find_name(c, NAME_GRP, name);
}

/* Grows an array of *cap elements of size bytes to hold n + 1. */
static void *room(void *v, size_t size, int n, int *cap)
{
	void *p;
	int want;

	if (n < *cap)
		return v;
	want = *cap ? 2 * *cap : 8;
	if (want <= n)
		want = n + 1;
	p = realloc(v, (size_t)want * size);
	if (p)
		*cap = want;
	return p;
}

struct sim_domain *sim_config_domain(struct sim_config *c)
{
	struct sim_domain *d = room(c->dom, sizeof(*d), c->ndom, &c->dom_cap);

	if (!d)
		return NULL;
	c->dom = d;
	memset(&d[c->ndom], 0, sizeof(*d));
	return &d[c->ndom];
}

struct sim_writer *sim_config_writer(struct sim_config *c)
{
	struct sim_writer *w = room(c->wr, sizeof(*w), c->nwr, &c->wr_cap);

	if (!w)
		return NULL;
	c->wr = w;
	memset(&w[c->nwr], 0, sizeof(*w));
	return &w[c->nwr];
}

int sim_config_reserve(struct sim_config *c, int ndom, int nwr)
{
	while (c->dom_cap < ndom) {
		struct sim_domain *d = room(c->dom, sizeof(*d), c->dom_cap, &c->dom_cap);

		if (!d)
			return -1;
		c->dom = d;
	}
	while (c->wr_cap < nwr) {
		struct sim_writer *w = room(c->wr, sizeof(*w), c->wr_cap, &c->wr_cap);

		if (!w)
			return -1;
		c->wr = w;
	}
	memset(c->dom + c->ndom, 0, (size_t)(c->dom_cap - c->ndom) * sizeof(*c->dom));
	memset(c->wr + c->nwr, 0, (size_t)(c->wr_cap - c->nwr) * sizeof(*c->wr));
	return 0;
}

/*
 * NAME[,count=N][,parent=NAME][,max=SIZE]...: one domain, or with count=N
 * the N domains NAME-1 .. NAME-N with the same limits (a writer given NAME
 * writes in each of them).
 */
int sim_parse_domain(const char *spec, struct sim_config *c, char *err, size_t len)
{
	char buf[512], *p = buf, *k, *v;
	struct sim_domain d, *slot;
	char name[sizeof(d.name) + 16];
	int first = 1, count = 0, i;
	size_t n;

	if (strlen(spec) >= sizeof(buf))
		return MSG("--domain: too long");
	strcpy(buf, spec);
	memset(&d, 0, sizeof(d));
	d.parent = -1;
	d.max = d.high = UINT64_MAX;
	while (next_kv(&p, &k, &v)) {
		int rc = 0;

		if (first) {
			first = 0;
			if (v || !*k || strlen(k) >= sizeof(d.name))
				return MSG("--domain: the first field is the name");
			if (find_domain(c, k) >= 0 || find_group(c, k) >= 0)
				return MSG("--domain: '%s' given twice", k);
			strcpy(d.name, k);
			continue;
		}
		if (!v)
			return MSG("--domain %s: '%s' needs a value", spec, k);
		if (!strcmp(k, "parent")) {
			d.parent = find_domain(c, v);
			if (d.parent < 0)
				return MSG("--domain %s: parent '%s' is not defined before", spec,
					   v);
		} else if (!strcmp(k, "count"))
			rc = parse_count(v, &count, err, len);
		else if (!strcmp(k, "max"))
			rc = size_in(v, 1, SIM_SIZE_MAX, &d.max, err, len);
		else if (!strcmp(k, "high"))
			rc = size_in(v, 1, SIM_SIZE_MAX, &d.high, err, len);
		else if (!strcmp(k, "bg"))
			rc = size_or_pct(v, &d.bg, &d.bg_pct, &d.bg_zero, err, len);
		else if (!strcmp(k, "dirty"))
			rc = size_or_pct(v, &d.dirty, &d.dirty_pct, &d.dirty_zero, err, len);
		else
			return MSG("--domain %s: unknown key '%s'", spec, k);
		if (rc)
			return keyed("--domain", spec, k, err, len);
	}
	if (first)
		return MSG("--domain: a name is needed");
	if (!count) {
		if (!(slot = sim_config_domain(c)))
			return MSG("--domain: out of memory");
		*slot = d;
		c->ndom++;
		return 0;
	}
	/* The group's names: NAME-1 .. NAME-N, none of them taken. */
	if (strlen(d.name) + 8 >= sizeof(d.name))
		return MSG("--domain %s: the name is too long for count=", d.name);
	{
		struct sim_group *g = room(c->grp, sizeof(*g), c->ngrp, &c->grp_cap);

		if (!g)
			return MSG("--domain: out of memory");
		c->grp = g;
	}
	for (i = 1; i <= count; i++) {
		snprintf(name, sizeof(name), "%s-%d", d.name, i);
		if (find_domain(c, name) >= 0)
			return MSG("--domain: '%s' given twice", name);
	}
	c->grp[c->ngrp].first = c->ndom;
	c->grp[c->ngrp].n = count;
	snprintf(c->grp[c->ngrp].name, sizeof(c->grp[c->ngrp].name), "%s", d.name);
	for (i = 1; i <= count; i++) {
		if (!(slot = sim_config_domain(c))) {
			c->ndom = c->grp[c->ngrp].first; /* none of the group stays */
			return MSG("--domain: out of memory");
		}
		*slot = d;
		n = (size_t)snprintf(name, sizeof(name), "%s-%d", d.name, i);
		memcpy(slot->name, name, n < sizeof(slot->name) ? n + 1 : sizeof(slot->name));
		slot->name[sizeof(slot->name) - 1] = '\0';
		c->ndom++;
	}
	c->ngrp++;
	return 0;
}

/* Whether a backend's name is one: not empty, none of ",=+:". */
static bool good_name(const char *s, size_t max)
{
	return *s && strlen(s) < max && !strpbrk(s, ",=+:") && strcmp(s, "default") &&
	       strcmp(s, "none") && strncmp(s, "file", 5);
}

int sim_parse_backend_opt(const char *spec, struct sim_config *c, char *err, size_t len)
{
	const char *colon = strchr(spec, ':'), *eq = strchr(spec, '=');
	struct sim_backend b;
	char name[sizeof(b.name)];
	size_t n;
	int i;

	if (!colon || (eq && eq < colon))
		return sim_parse_backend(spec, &c->backend, err, len);
	n = (size_t)(colon - spec);
	if (n >= sizeof(name))
		return MSG("--backend: the name '%.*s' is too long", (int)n, spec);
	memcpy(name, spec, n);
	name[n] = 0;
	if (!good_name(name, sizeof(name)))
		return MSG("--backend: bad name '%s' (not empty, no ',', '=', '+' or ':', not "
			   "default, none or file)",
			   name);
	i = find_backend(c, name);
	if (i > 0) {
		b = c->bk[i - 1];
	} else {
		/* A new one starts from the built-in figures. */
		struct sim_config d;

		sim_config_init(&d);
		b = d.backend;
		strcpy(b.name, name);
	}
	if (colon[1] && parse_backend(spec, colon + 1, &b, err, len))
		return -1;
	if (i > 0) {
		c->bk[i - 1] = b;
		return 0;
	}
	{
		struct sim_backend *v = room(c->bk, sizeof(*v), c->nbk, &c->bk_cap);

		if (!v)
			return MSG("--backend: out of memory");
		c->bk = v;
	}
	c->bk[c->nbk++] = b;
	return 0;
}

/* A striping over the backends of list (NAME,NAME,...), size bytes on
 * each in turn, added to c->stripe: 0, or -1 with a message. */
static int stripe_add(struct sim_config *c, char *list, uint64_t size, const char *what, char *err,
		      size_t len)
{
	struct sim_stripe st = { NULL, 0, size };
	char *p = list, *k, *v;
	int cap = 0;

	if (!size)
		return MSG("%s: the stripe size must not be 0", what);
	while (next_kv(&p, &k, &v)) {
		int i = v ? -1 : find_backend(c, k), j;

		if (i < 0) {
			free(st.bk);
			if (v)
				return MSG("%s: '%s=%s' is not a backend name", what, k, v);
			return MSG("%s: stripe over an unknown backend '%s' (--backend %s:...)",
				   what, k, k);
		}
		for (j = 0; j < st.n; j++)
			if (st.bk[j] == i) {
				free(st.bk);
				return MSG("%s: backend '%s' twice in one stripe", what, k);
			}
		{
			int *nb = room(st.bk, sizeof(*nb), st.n, &cap);

			if (!nb) {
				free(st.bk);
				return MSG("%s: out of memory", what);
			}
			st.bk = nb;
		}
		st.bk[st.n++] = i;
	}
	if (!st.n)
		return MSG("%s: a stripe needs at least one backend", what);
	{
		struct sim_stripe *v2 = room(c->stripe, sizeof(*v2), c->nstripe, &c->stripe_cap);

		if (!v2) {
			free(st.bk);
			return MSG("%s: out of memory", what);
		}
		c->stripe = v2;
	}
	c->stripe[c->nstripe++] = st;
	return 0;
}

int sim_parse_stripe(const char *spec, struct sim_config *c, char *err, size_t len)
{
	char buf[1024], *names = buf, *sz;
	uint64_t size = 1 << 20;

	if (strlen(spec) >= sizeof(buf))
		return MSG("--stripe: too long");
	if (!strcmp(spec, "none")) {
		c->cur_stripe = 0;
		return 0;
	}
	strcpy(buf, spec);
	/* size= is the last field, or none */
	sz = strstr(buf, "size=");
	if (sz) {
		if (sz != buf && sz[-1] != ',')
			return MSG("--stripe: bad field before 'size='");
		if (sz != buf)
			sz[-1] = 0;
		else
			names = sz + strlen(sz); /* no names */
		if (strchr(sz, ','))
			return MSG("--stripe: size=SIZE comes last");
		if (size_in(sz + 5, 1, SIM_STRIPE_MAX, &size, err, len))
			return keyed("--stripe", spec, "size", err, len);
	}
	if (stripe_add(c, names, size, "--stripe", err, len))
		return -1;
	c->cur_stripe = c->nstripe;
	return 0;
}

/*
 * DOMAIN,bytes=SIZE[,bs=SIZE][,start=TIME][,rate=RATE][,count=N]: one
 * writer in DOMAIN, or count=N of them; DOMAIN may name a group made by
 * --domain NAME,count=N: then as many in each of its domains.
 */
int sim_parse_writer(const char *spec, struct sim_config *c, char *err, size_t len)
{
	char buf[512], *p = buf, *k, *v;
	struct sim_writer w = { .domain = -1, .bs = 1 << 20, .stripe = c->cur_stripe };
	int first = 1, count = 1, group = -1, ndom = 1, i, j, backend = -1;
	char *stripe = NULL;
	uint64_t ssize = 1 << 20;
	bool has_ssize = false;

	if (strlen(spec) >= sizeof(buf))
		return MSG("--writer: too long");
	strcpy(buf, spec);
	while (next_kv(&p, &k, &v)) {
		int rc = 0;

		if (first) {
			first = 0;
			if (v)
				return MSG("--writer: the first field is a domain name");
			w.domain = find_domain(c, k);
			if (w.domain < 0 && (group = find_group(c, k)) >= 0) {
				w.domain = c->grp[group].first;
				ndom = c->grp[group].n;
			}
			if (w.domain < 0)
				return MSG("--writer: domain '%s' is not defined", k);
			continue;
		}
		if (!v)
			return MSG("--writer %s: '%s' needs a value", spec, k);
		if (!strcmp(k, "bytes"))
			rc = size_in(v, 1, SIM_SIZE_MAX, &w.bytes, err, len);
		else if (!strcmp(k, "bs"))
			rc = size_in(v, 1, SIM_BLOCK_MAX, &w.bs, err, len);
		else if (!strcmp(k, "start"))
			rc = sim_parse_time(v, &w.start_ns, err, len);
		else if (!strcmp(k, "rate"))
			rc = sim_parse_rate(v, &w.rate, err, len);
		else if (!strcmp(k, "count"))
			rc = parse_count(v, &count, err, len);
		else if (!strcmp(k, "backend")) {
			if ((backend = find_backend(c, v)) < 0)
				return MSG(
					"--writer: backend '%s' is not defined (--backend %s:...)",
					v, v);
		} else if (!strcmp(k, "stripe"))
			stripe = v;
		else if (!strcmp(k, "stripe-size")) {
			rc = size_in(v, 1, SIM_STRIPE_MAX, &ssize, err, len);
			has_ssize = true;
		} else
			return MSG("--writer %s: unknown key '%s'", spec, k);
		if (rc)
			return keyed("--writer", spec, k, err, len);
	}
	if (w.domain < 0)
		return MSG("--writer: a domain is needed");
	if (!w.bytes)
		return MSG("--writer %s: bytes=SIZE is needed", spec);
	if ((long long)count * ndom > SIM_WRITERS_MAX)
		return MSG("--writer %s: %lld writers (count=%d in each of %d domains): at most "
			   "%d at once",
			   spec, (long long)count * ndom, count, ndom, SIM_WRITERS_MAX);
	if (has_ssize && !stripe)
		return MSG("--writer: stripe-size= goes with stripe=NAME1+NAME2...");
	if (backend >= 0 && stripe)
		return MSG("--writer: backend= or stripe=, not both");
	if (backend >= 0) {
		w.backend = backend;
		w.stripe = 0; /* its own backend, not the --stripe before it */
	}
	if (stripe) {
		char *q;

		for (q = stripe; *q; q++)
			if (*q == '+')
				*q = ',';
		if (stripe_add(c, stripe, ssize, "--writer: stripe=", err, len))
			return -1;
		w.stripe = c->nstripe;
	}
	if (w.stripe && c->stripe[w.stripe - 1].size % w.bs)
		return MSG("--writer: the stripe size (%llu) must be a multiple of bs (%llu)",
			   (unsigned long long)c->stripe[w.stripe - 1].size,
			   (unsigned long long)w.bs);
	for (i = 0; i < ndom; i++)
		for (j = 0; j < count; j++) {
			struct sim_writer *slot = sim_config_writer(c);

			if (!slot)
				return MSG("--writer: out of memory");
			*slot = w;
			slot->domain = w.domain + i;
			c->nwr++;
		}
	return 0;
}

void sim_config_free(struct sim_config *c)
{
	int i;

	for (i = 0; i < c->nstripe; i++)
		free(c->stripe[i].bk);
	free(c->stripe);
	free(c->bk);
	if (c->names)
		free(c->names->slot);
	free(c->names);
	c->stripe = NULL;
	c->bk = NULL;
	c->names = NULL;
	c->nstripe = c->stripe_cap = c->nbk = c->bk_cap = c->cur_stripe = 0;
	free(c->dom);
	free(c->wr);
	free(c->grp);
	c->dom = NULL;
	c->wr = NULL;
	c->grp = NULL;
	c->ndom = c->nwr = c->ngrp = 0;
	c->dom_cap = c->wr_cap = c->grp_cap = 0;
}

void sim_config_init(struct sim_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->scenario, "custom");
	c->memory = 64ull << 30;
	c->backend.bw = 1ull << 30;
	c->backend.lat_ns = 1000000;
	c->backend.rpcs = 8;
	c->backend.rpc = 4 << 20;
	c->backend.commit_interval = 5000000000ull;
	c->backend.commit_lat = 20000000;
	c->backend.journal = 1ull << 30;
	c->seed = 1;
}
