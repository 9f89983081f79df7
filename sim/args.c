/*
 * unstable-sim: the command line's values. Sizes take K/M/G/T (powers of
 * 1024), rates SIZE/s, times ns/us/ms/s. Every error names what was wrong.
 *
 * SPDX-License-Identifier: MIT
 */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG(...) (snprintf(err, len, __VA_ARGS__), -1)

/* A number with an optional fraction: "1", "2.5". */
static int number(const char *s, double *v, const char **end)
{
	char *e;

	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	*v = strtod(s, &e);
	if (e == s || errno || *v < 0)
		return -1;
	*end = e;
	return 0;
}

int sim_parse_size(const char *s, uint64_t *out, char *err, size_t len)
{
	const char *e;
	double v, m = 1;

	if (number(s, &v, &e))
		return MSG("bad size '%s': expected a number with K, M, G or T", s);
	switch (*e) {
	case 'K':
		m = 1024.0;
		e++;
		break;
	case 'M':
		m = 1024.0 * 1024;
		e++;
		break;
	case 'G':
		m = 1024.0 * 1024 * 1024;
		e++;
		break;
	case 'T':
		m = 1024.0 * 1024 * 1024 * 1024;
		e++;
		break;
	default:
		break;
	}
	if (*e == 'i' && e[1] == 'B')
		e += 2;
	else if (*e == 'B')
		e++;
	if (*e)
		return MSG("bad size '%s': unknown suffix '%s'", s, e);
	v *= m;
	if (v >= 18446744073709551615.0)
		return MSG("size '%s' is too large", s);
	*out = (uint64_t)v;
	return 0;
}

int sim_parse_time(const char *s, uint64_t *out, char *err, size_t len)
{
	const char *e;
	double v, m;

	if (number(s, &v, &e))
		return MSG("bad time '%s': expected a number with ns, us, ms or s", s);
	if (!strcmp(e, "ns"))
		m = 1;
	else if (!strcmp(e, "us"))
		m = 1e3;
	else if (!strcmp(e, "ms"))
		m = 1e6;
	else if (!strcmp(e, "s"))
		m = 1e9;
	else
		return MSG("bad time '%s': the unit must be ns, us, ms or s", s);
	v *= m;
	if (v >= 18446744073709551615.0)
		return MSG("time '%s' is too large", s);
	*out = (uint64_t)v;
	return 0;
}

int sim_parse_rate(const char *s, uint64_t *out, char *err, size_t len)
{
	char buf[64];
	size_t n = strlen(s);

	if (n < 3 || n >= sizeof(buf) || strcmp(s + n - 2, "/s"))
		return MSG("bad rate '%s': expected SIZE/s, like 2G/s", s);
	memcpy(buf, s, n - 2);
	buf[n - 2] = 0;
	if (sim_parse_size(buf, out, err, len))
		return -1;
	if (*out == 0)
		return MSG("rate '%s' must not be 0", s);
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

int sim_parse_backend(const char *spec, struct sim_backend *b, char *err, size_t len)
{
	char buf[512], *p = buf, *k, *v;

	if (strlen(spec) >= sizeof(buf))
		return MSG("--backend: too long");
	strcpy(buf, spec);
	while (next_kv(&p, &k, &v)) {
		int rc;

		if (!v)
			return MSG("--backend: '%s' needs a value (key=value)", k);
		if (!strcmp(k, "bw"))
			rc = sim_parse_rate(v, &b->bw, err, len);
		else if (!strcmp(k, "lat"))
			rc = sim_parse_time(v, &b->lat_ns, err, len);
		else if (!strcmp(k, "rpcs")) {
			char *e;

			b->rpcs = strtoull(v, &e, 10);
			rc = (*e || !b->rpcs) ? MSG("--backend: rpcs must be a positive count") : 0;
		} else if (!strcmp(k, "rpc"))
			rc = sim_parse_size(v, &b->rpc, err, len);
		else if (!strcmp(k, "commit-interval"))
			rc = sim_parse_time(v, &b->commit_interval, err, len);
		else if (!strcmp(k, "commit-lat"))
			rc = sim_parse_time(v, &b->commit_lat, err, len);
		else if (!strcmp(k, "journal"))
			rc = sim_parse_size(v, &b->journal, err, len);
		else
			return MSG("--backend: unknown key '%s'", k);
		if (rc)
			return -1;
	}
	if (!b->rpc || !b->commit_interval)
		return MSG("--backend: rpc and commit-interval must not be 0");
	return 0;
}

static int find_domain(const struct sim_config *c, const char *name)
{
	int i;

	for (i = 0; i < c->ndom; i++)
		if (!strcmp(c->dom[i].name, name))
			return i;
	return -1;
}

/* SIZE or PCT% */
static int size_or_pct(const char *v, uint64_t *bytes, unsigned *pct, char *err, size_t len)
{
	size_t n = strlen(v);

	if (n && v[n - 1] == '%') {
		char *e;
		unsigned long p = strtoul(v, &e, 10);

		if (e != v + n - 1 || p > 100 || e == v)
			return MSG("bad percentage '%s'", v);
		*pct = (unsigned)p;
		*bytes = 0;
		return 0;
	}
	*pct = 0;
	return sim_parse_size(v, bytes, err, len);
}

/* A count=N: a positive number, at most max. */
static int parse_count(const char *what, const char *v, long max, int *out, char *err, size_t len)
{
	char *e;
	long n;

	errno = 0;
	n = strtol(v, &e, 10);
	if (e == v || *e || errno || n < 1 || n > max)
		return MSG("%s: count must be between 1 and %ld", what, max);
	*out = (int)n;
	return 0;
}

static int find_group(const struct sim_config *c, const char *name)
{
	int i;

	for (i = 0; i < c->ngrp; i++)
		if (!strcmp(c->grp[i].name, name))
			return i;
	return -1;
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
			return MSG("--domain %s: '%s' needs a value", d.name, k);
		if (!strcmp(k, "parent")) {
			d.parent = find_domain(c, v);
			if (d.parent < 0)
				return MSG("--domain %s: parent '%s' is not defined before", d.name,
					   v);
		} else if (!strcmp(k, "count"))
			rc = parse_count("--domain", v, 1000000, &count, err, len);
		else if (!strcmp(k, "max"))
			rc = sim_parse_size(v, &d.max, err, len);
		else if (!strcmp(k, "high"))
			rc = sim_parse_size(v, &d.high, err, len);
		else if (!strcmp(k, "bg"))
			rc = size_or_pct(v, &d.bg, &d.bg_pct, err, len);
		else if (!strcmp(k, "dirty"))
			rc = size_or_pct(v, &d.dirty, &d.dirty_pct, err, len);
		else
			return MSG("--domain %s: unknown key '%s'", d.name, k);
		if (rc)
			return -1;
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

/*
 * DOMAIN,bytes=SIZE[,bs=SIZE][,start=TIME][,rate=RATE][,count=N]: one
 * writer in DOMAIN, or count=N of them; DOMAIN may name a group made by
 * --domain NAME,count=N: then as many in each of its domains.
 */
int sim_parse_writer(const char *spec, struct sim_config *c, char *err, size_t len)
{
	char buf[512], *p = buf, *k, *v;
	struct sim_writer w = { .domain = -1, .bs = 1 << 20 };
	int first = 1, count = 1, group = -1, ndom = 1, i, j;

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
			return MSG("--writer: '%s' needs a value", k);
		if (!strcmp(k, "bytes"))
			rc = sim_parse_size(v, &w.bytes, err, len);
		else if (!strcmp(k, "bs"))
			rc = sim_parse_size(v, &w.bs, err, len);
		else if (!strcmp(k, "start"))
			rc = sim_parse_time(v, &w.start_ns, err, len);
		else if (!strcmp(k, "rate"))
			rc = sim_parse_rate(v, &w.rate, err, len);
		else if (!strcmp(k, "count"))
			rc = parse_count("--writer", v, 1000000, &count, err, len);
		else
			return MSG("--writer: unknown key '%s'", k);
		if (rc)
			return -1;
	}
	if (w.domain < 0)
		return MSG("--writer: a domain is needed");
	if (!w.bytes)
		return MSG("--writer: bytes=SIZE is needed");
	if (!w.bs || w.bs > (1ull << 30))
		return MSG("--writer: bs must be between 1 and 1G");
	if ((long long)count * ndom > 1000000)
		return MSG("--writer: at most 1000000 writers at once");
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
