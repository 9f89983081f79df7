/*
 * unstable-fuse, NFSv3 backend (nfs.h): mounting and the backend's
 * lifetime. The URL's checks, a context mounted on it (the namespace's, the
 * data's, and the data's again on a reconnect), the server's longest name,
 * attach (the namespace contexts and the data's, the write connection's
 * address and first socket), start (the service thread), detach, and the
 * statistics.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include "nfs.h"

/* ------------------------------------------------------------------------ */
/* Mounting                                                                  */

/* Whether a numeric argument of the URL is not a number (libnfs reads
 * "nfsport=abc" as 0: the portmapper); the reason in err. */
static bool bad_args(const char *url, char *err, size_t errlen)
{
	static const char *const numeric[] = { "nfsport=", "mountport=", "version=",	  "uid=",
					       "gid=",	   "readahead=", "autoreconnect=" };
	const char *q = strchr(url, '?');

	while (q && *q) {
		q++;
		for (size_t i = 0; i < sizeof(numeric) / sizeof(numeric[0]); i++) {
			size_t n = strlen(numeric[i]);
			const char *v = q + n;

			if (strncmp(q, numeric[i], n) != 0)
				continue;
			if (*v == '-')
				v++;
			if (!(*v >= '0' && *v <= '9')) {
				snprintf(err, errlen, "bad NFS URL '%s': %.*s is not a number", url,
					 (int)strcspn(q, "&"), q);
				return true;
			}
			while (*v >= '0' && *v <= '9')
				v++;
			if (*v && *v != '&') {
				snprintf(err, errlen, "bad NFS URL '%s': %.*s is not a number", url,
					 (int)strcspn(q, "&"), q);
				return true;
			}
		}
		q = strchr(q, '&');
	}
	return false;
}

/* A new context mounted on the URL; NULL with the reason in err. */
struct nfs_context *nfsb_mount_ctx(const char *url, bool data, char *err, size_t errlen,
				   char **server, char **export)
{
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *u;

	if (!nfs) {
		snprintf(err, errlen, "cannot create an NFS context");
		return NULL;
	}
	if (bad_args(url, err, errlen)) {
		nfs_destroy_context(nfs);
		return NULL;
	}
	if (!(u = nfs_parse_url_dir(nfs, url))) {
		snprintf(err, errlen, "bad NFS URL '%s': %s", url, nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return NULL;
	}
	if (!u->server || !*u->server || !u->path || !*u->path) {
		snprintf(err, errlen, "bad NFS URL '%s': no server or no export", url);
		goto fail;
	}
	/* The ports are the URL's; NFSv3 only. */
	nfs_set_version(nfs, NFS_V3);
	nfs_set_timeout(nfs, 10000);
	/* No directory cache in libnfs: directories are read with our own
	 * READDIRPLUS3 (handles.c), and the raw calls change them behind
	 * libnfs, which would take a listing as current while the directory's
	 * mtime is the same (a server with a coarse clock keeps it through
	 * several changes). */
	nfs_set_dircache(nfs, 0);
	/* The data context is reconnected by the service thread, with
	 * backoff; libnfs's own reconnect would retry at once, for ever, and
	 * resend by itself. */
	if (data)
		nfs_set_autoreconnect(nfs, 0);
	if (nfs_mount(nfs, u->server, u->path) != 0) {
		const char *e = nfs_get_error(nfs) ? nfs_get_error(nfs) : "?";
		const char *why = "cannot mount";

		if (strstr(e, "NOENT") || strstr(e, "not exported") || strstr(e, "ACCES"))
			why = "no such export (or not exported to us)";
		else if (strstr(e, "nfs_service failed") || strstr(e, "connect") ||
			 strstr(e, "not available") || strstr(e, "timed out") ||
			 strstr(e, "Connection"))
			why = "the NFS server does not answer";
		snprintf(err, errlen, "%s:%s: %s (%s)", u->server, u->path, why, e);
		goto fail;
	}
	if (server && !*server)
		*server = strdup(u->server);
	if (export && !*export)
		*export = strdup(u->path);
	nfs_destroy_url(u);
	return nfs;
fail:
	nfs_destroy_url(u);
	nfs_destroy_context(nfs);
	return NULL;
}

struct pathconf_wait {
	bool done;
	uint32_t name_max;
};

static void pathconf_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct pathconf_wait *w = priv;
	PATHCONF3res *res = data;

	(void)rpc;
	if (status == RPC_STATUS_SUCCESS && res->status == NFS3_OK)
		w->name_max = res->PATHCONF3res_u.resok.name_max;
	w->done = true;
}

/* The longest name the server takes (PATHCONF3 of the export's root), for
 * statfs: libnfs's own statvfs reports 256, so that a program that
 * creates a name of NAME_MAX bytes (as pjdfstest does) was refused. 0
 * when the server does not say. Before the service thread runs: the call is
 * serviced here, on the namespace context, within 5 s. */
static uint32_t server_name_max(struct nb *nb)
{
	struct rpc_context *rpc = nfs_get_rpc_context(nb->ns);
	struct pathconf_wait *w = calloc(1, sizeof(*w));
	struct nfsfh *root = NULL;
	struct lnfs_fh *fh;
	uint32_t max = 0;
	PATHCONF3args a;
	int i;

	if (!w || nfs_open(nb->ns, "/", O_RDONLY, &root) != 0 ||
	    !(fh = (struct lnfs_fh *)nfs_get_fh(root)))
		goto out;
	a.object.data.data_len = (u_int)fh->len;
	a.object.data.data_val = fh->val;
	if (rpc_nfs3_pathconf_async(rpc, pathconf_cb, &a, w) != 0)
		goto out;
	for (i = 0; i < 50 && !w->done; i++) {
		struct pollfd pfd = { .fd = rpc_get_fd(rpc), .events = (short)rpc_which_events(rpc) };

		if (poll(&pfd, 1, 100) < 0 || rpc_service(rpc, pfd.revents) < 0)
			break;
	}
	if (!w->done) {
		/* Not answered in time: the call stays queued on the context,
		 * whose callback may still write into w; left to it. */
		w = NULL;
		goto out;
	}
	/* As the Linux NFS client: at most NFS3's 255 (ganesha says 1024
	 * over a filesystem that takes 255). */
	max = w->name_max < 255 ? w->name_max : 255;
out:
	free(w);
	if (root)
		nfs_close(nb->ns, root);
	return max;
}

int nfsb_attach(struct ufs *fs, const char *target)
{
	struct nb *nb = calloc(1, sizeof(*nb));
	char err[1024];

	if (!nb || !(nb->url = strdup(target))) {
		free(nb);
		fprintf(stderr, "unstable-fuse: out of memory\n");
		return -ENOMEM;
	}
	nb->fs = fs;
	nb->wake[0] = nb->wake[1] = -1;
	{
		const char *v = getenv("UFS_TEST_COMMIT_DELAY_MS");

		nb->test_commit_delay_ms = v ? (unsigned)strtoul(v, NULL, 10) : 0;
	}
	pthread_mutex_init(&nb->ns_lock, NULL);
	pthread_mutex_init(&nb->ac_lock, NULL);
	nb->ac_ttl_ns = fs->opt.attr_cache_ns;
	if (nb->ac_ttl_ns && (!(nb->ac = calloc(AC_SLOTS, sizeof(*nb->ac))) ||
			      !(nb->made = calloc(NB_MADE_DIRS, sizeof(*nb->made))))) {
		free(nb->ac);
		free(nb->url);
		free(nb);
		fprintf(stderr, "unstable-fuse: out of memory\n");
		return -ENOMEM;
	}
	pthread_mutex_init(&nb->lock, NULL);
	pthread_mutex_init(&nb->send_lock, NULL);
	pthread_cond_init(&nb->cond, NULL);
	nb->done_tail = &nb->done;
	nb->wq_tail = &nb->wq;
	nb->wfd = -1;
	nb->wbackoff_ms = 50;
	nb->cap = fs->opt.rpcs ? fs->opt.rpcs : 16;
	nb->nchan = fs->opt.ns_conns ? fs->opt.ns_conns : 4;
	fs->be_priv = nb;
	if (!(nb->chan = calloc(nb->nchan, sizeof(*nb->chan)))) {
		fprintf(stderr, "unstable-fuse: out of memory\n");
		goto fail;
	}
	for (unsigned i = 0; i < nb->nchan; i++) {
		pthread_mutex_init(&nb->chan[i].lock, NULL);
		if (!(nb->chan[i].nfs = nfsb_mount_ctx(target, false, err, sizeof(err),
						       &nb->server, &nb->export))) {
			fprintf(stderr, "unstable-fuse: %s\n", err);
			goto fail;
		}
	}
	nb->ns = nb->chan[0].nfs;
	if (!(nb->data = nfsb_mount_ctx(target, true, err, sizeof(err), NULL, NULL))) {
		fprintf(stderr, "unstable-fuse: %s\n", err);
		goto fail;
	}
	nb->rpc = nfs_get_rpc_context(nb->data);
	nb->wsize = min_u64(nfs_get_writemax(nb->data), NB_MAX_WSIZE);
	nb->rsize = min_u64(nfs_get_readmax(nb->data), NB_MAX_WSIZE);
	if (nb->wsize < ufs_chunk_bytes || nb->rsize < 4096) {
		fprintf(stderr,
			"unstable-fuse: %s: the server's write size %llu is under the chunks' %llu "
			"(--chunk)\n",
			target, (unsigned long long)nb->wsize, (unsigned long long)ufs_chunk_bytes);
		goto fail;
	}
	nb->wsize -= nb->wsize % ufs_chunk_bytes;
	/* The write connection goes where the data context went: the
	 * server's NFS port. */
	nb->waddrlen = sizeof(nb->waddr);
	if (getpeername(rpc_get_fd(nb->rpc), (struct sockaddr *)&nb->waddr, &nb->waddrlen) != 0 ||
	    !(nb->rbuf = malloc(WC_RBUF)) || !(nb->rec = calloc(1, sizeof(*nb->rec)))) {
		fprintf(stderr, "unstable-fuse: %s: no address for the write connection: %s\n",
			target, strerror(errno));
		goto fail;
	}
	nfsb_wc_cred(nb);
	if ((nb->wfd = nfsb_wc_connect(nb)) < 0) {
		fprintf(stderr, "unstable-fuse: %s: the write connection: %s\n", target,
			strerror(errno));
		goto fail;
	}
	nb->wup = true;
	if (pipe2(nb->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "unstable-fuse: pipe: %s\n", strerror(errno));
		goto fail;
	}
	if (nfsb_fh_root(nb) != 0) {
		fprintf(stderr, "unstable-fuse: %s: no handle for the export's root\n", target);
		goto fail;
	}
	nb->name_max = server_name_max(nb);
	nb->up = true;
	return 0;
fail:
	if (nb->wfd >= 0)
		close(nb->wfd);
	free(nb->rbuf);
	free(nb->rec);
	for (unsigned i = 0; nb->chan && i < nb->nchan; i++)
		if (nb->chan[i].nfs)
			nfs_destroy_context(nb->chan[i].nfs);
	free(nb->chan);
	if (nb->data)
		nfs_destroy_context(nb->data);
	free(nb->server);
	free(nb->export);
	free(nb->url);
	free(nb->ac); /* (empty: nothing was looked up yet) */
	free(nb->made);
	free(nb->fhc);
	free(nb);
	fs->be_priv = NULL;
	return -EHOSTUNREACH;
}

int nfsb_start(struct ufs *fs)
{
	struct nb *nb = nb_of(fs);
	int rc;

	/* The engine keeps no more in writeback than the RPCs can carry. */
	us_backend_set_max_inflight(fs->backend, nb->cap * nb->wsize);
	if ((rc = pthread_create(&nb->thread, NULL, nfsb_service_main, nb)))
		return -rc;
	nb->thread_started = true;
	return 0;
}

void nfsb_detach(struct ufs *fs)
{
	struct nb *nb = nb_of(fs);

	if (!nb)
		return;
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	nb->stop = true;
	pthread_cond_broadcast(&nb->cond);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	if (nb->thread_started) {
		nfsb_poke(nb);
		pthread_join(nb->thread, NULL);
	}
	if (nb->data)
		nfs_destroy_context(nb->data);
	if (nb->wfd >= 0)
		close(nb->wfd);
	nfsb_nc_close(nb);
	free(nb->nc);
	while (nb->wq) {
		struct req *r = nb->wq;

		nb->wq = r->wnext;
		free(r);
	}
	free(nb->rbuf);
	free(nb->rec);
	while (nb->done) {
		struct req *r = nb->done;

		nb->done = r->next;
		free(r);
	}
	while (nb->retry) {
		struct req *r = nb->retry;

		nb->retry = r->next;
		free(r);
	}
	for (unsigned i = 0; i < nb->nchan; i++) {
		nfs_umount(nb->chan[i].nfs);
		nfs_destroy_context(nb->chan[i].nfs);
		pthread_mutex_destroy(&nb->chan[i].lock);
	}
	free(nb->chan);
	nfsb_ac_clear(nb);
	free(nb->ac);
	free(nb->made); /* (emptied with the attributes) */
	nfsb_fh_clear(nb);
	free(nb->fhc);
	close(nb->wake[0]);
	close(nb->wake[1]);
	free(nb->server);
	free(nb->export);
	free(nb->url);
	free(nb);
	fs->be_priv = NULL;
}

void nfsb_stats(struct ufs *fs, FILE *f)
{
	struct nb *nb = nb_of(fs);
	bool up;

	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	up = nb->up;
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	fprintf(f,
		"backend nfs\n"
		"nfs_url %s\n"
		"nfs_connected %d\n"
		"nfs_rpcs_max %u\n"
		"nfs_wsize %llu\n"
		"nfs_peak_file_rpcs %llu\n"
		"nfs_writes %llu\n"
		"nfs_write_bytes %llu\n"
		"nfs_page_writes %llu\n"
		"nfs_stable_replies %llu\n"
		"nfs_write_errors %llu\n"
		"nfs_commits %llu\n"
		"nfs_early_commits %llu\n"
		"nfs_commit_errors %llu\n"
		"nfs_sealed_commits %llu\n"
		"nfs_commit_resends %llu\n"
		"nfs_verifier_changes %llu\n"
		"nfs_resent_bytes %llu\n"
		"nfs_reconnects %llu\n"
		"nfs_write_connects %llu\n"
		"nfs_outage_ms %llu\n"
		"nfs_last_outage_ms %llu\n"
		"nfs_reads %llu\n"
		"nfs_attr_cache_hits %llu\n"
		"nfs_attr_cache_misses %llu\n"
		"nfs_made_misses %llu\n"
		"nfs_handle_rpcs %llu\n"
		"nfs_ns_conns %u\n"
		"nfs_ns_peak %llu\n\n",
		nb->url, up, nb->cap, (unsigned long long)nb->wsize,
		(unsigned long long)atomic_load(&nb->peak_file_rpcs),
		(unsigned long long)atomic_load(&nb->writes),
		(unsigned long long)atomic_load(&nb->write_bytes),
		(unsigned long long)atomic_load(&nb->page_writes),
		(unsigned long long)atomic_load(&nb->stable_replies),
		(unsigned long long)atomic_load(&nb->write_errors),
		(unsigned long long)atomic_load(&nb->commits),
		(unsigned long long)atomic_load(&nb->early_commits),
		(unsigned long long)atomic_load(&nb->commit_errors),
		(unsigned long long)atomic_load(&nb->sealed_commits),
		(unsigned long long)atomic_load(&nb->commit_resends),
		(unsigned long long)atomic_load(&nb->verf_changes),
		(unsigned long long)(atomic_load(&nb->lost_bufs) * ufs_chunk_bytes),
		(unsigned long long)atomic_load(&nb->reconnects),
		(unsigned long long)atomic_load(&nb->wreconnects),
		(unsigned long long)atomic_load(&nb->outage_ms),
		(unsigned long long)atomic_load(&nb->outage_last_ms),
		(unsigned long long)atomic_load(&nb->reads),
		(unsigned long long)atomic_load(&nb->ac_hits),
		(unsigned long long)atomic_load(&nb->ac_misses),
		(unsigned long long)atomic_load(&nb->made_misses),
		(unsigned long long)atomic_load(&nb->ns_rpcs), nb->nchan,
		(unsigned long long)atomic_load(&nb->ns_peak));
}
