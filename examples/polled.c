/* polled.c: the engine inside an epoll event loop; polled mode, no threads.
 * SPDX-License-Identifier: MIT
 *
 * The loop owns three fds: tfd, a timerfd armed at the time us_engine_poll() asks to be called
 * again; efd, an eventfd the backend signals when replies wait; wfd, a timerfd that wakes the
 * writer after a throttle pause or a reclaim wait. The backend never blocks: flush "sends" the
 * run (copies it to the server's memory) and queues its replies, commit queues a request; the
 * loop delivers both later, as a client delivers replies read from a socket. At the end the
 * server's durable copy is compared with what was written. */
#define _GNU_SOURCE /* timerfd, eventfd, epoll */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <unstable/unstable.h>

#define BUF	     (64u << 10) /* one buffer: 64 KiB */
#define SIZE	     (16u << 20) /* the file: 16 MiB */
#define MAX	     (2u << 20)	 /* the domain's max: 2 MiB, never crossed */
#define NBLK	     (SIZE / BUF)
#define PATTERN(off) ((unsigned char)((off)*7 + (off) / BUF)) /* the byte written at off */

static struct server {
	us_backend *be;
	int efd, commit_asked;
	us_buf *acks[NBLK]; /* replies not yet delivered (a buffer is in flight once at most) */
	size_t nacks;
	uint64_t seq, committed, commits, blk_seq[NBLK]; /* write numbers; per block, its last */
	unsigned char recv[SIZE], disk[SIZE];		 /* received (unstable), durable */
} srv;

/* Arms a timerfd ns from now, or at ns (absolute: the engine's clock is CLOCK_MONOTONIC);
 * at least 1 ns, since 0 would disarm it. */
static void arm(int fd, uint64_t ns, int absolute)
{
	struct itimerspec its = { .it_value = { ns / 1000000000u, ns % 1000000000u + !ns } };
	timerfd_settime(fd, absolute ? TFD_TIMER_ABSTIME : 0, &its, NULL);
}

/* flush: the run goes on the wire; its replies (UNSTABLE, with a seq) come later. */
static int on_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		    uint64_t len, enum us_reason why)
{
	for (size_t i = 0; i < n; i++) {
		memcpy(srv.recv + us_buf_offset(bufs[i]), us_buf_data(bufs[i]), BUF);
		srv.blk_seq[us_buf_offset(bufs[i]) / BUF] = ++srv.seq;
		srv.acks[srv.nacks++] = bufs[i];
	}
	eventfd_write(srv.efd, 1);
	return 0;
}

/* commit: asked now, done when the loop gets to it. */
static int on_commit(void *ctx, us_object *o, enum us_reason why)
{
	return srv.commit_asked = 1, eventfd_write(srv.efd, 1), 0;
}

/* The "network": delivers the queued replies, then makes everything received durable. */
static void srv_reply(void)
{
	while (srv.nacks) { /* each reply with the seq its write was given */
		us_buf *b = srv.acks[--srv.nacks];
		us_buf_write_done(b, US_WRITE_UNSTABLE, srv.blk_seq[us_buf_offset(b) / BUF], 0);
	}
	if (srv.commit_asked && srv.seq) {
		for (size_t k = 0; k < NBLK; k++)
			if (srv.blk_seq[k] > srv.committed)
				memcpy(srv.disk + k * BUF, srv.recv + k * BUF, BUF);
		srv.commit_asked = 0, srv.commits++;
		us_backend_commit_done(srv.be, srv.committed = srv.seq);
	}
}

/* Writes the buffer at off: 1 when done, 0 when the domain is full, -1 on error; *wait_ns. */
static int write_one(us_object *o, uint64_t off, uint64_t *wait_ns)
{
	us_buf *b;
	int rc = us_buf_get(o, off, BUF, US_GET_NOWAIT, &b); /* never blocks */
	*wait_ns = 0;
	if (rc < 0) /* -EAGAIN, full: reclaim writes back and commits; come back after *wait_ns */
		return rc == -EAGAIN && us_object_reclaim(o, BUF, wait_ns) != -ENOMEM ? 0 : -1;
	for (uint64_t i = 0; i < BUF; i++)
		((unsigned char *)us_buf_data(b))[i] = PATTERN(off + i);
	if (us_buf_dirty(b, wait_ns) == US_DIRTY_OVER_LIMIT) /* the throttle's pause in *wait_ns */
		*wait_ns += !*wait_ns; /* at the dirty limit: wait for the gate to open */
	us_buf_put(b);
	return 1;
}

int main(void)
{
	struct us_backend_ops ops = { .size = sizeof(ops), .flush = on_flush, .commit = on_commit };
	struct us_domain_stats st = { .size = sizeof(st) };
	struct epoll_event ev[3];
	us_engine *e; /* the engine, its one domain "app", the file */
	us_domain *d;
	us_object *o;
	us_sync *sync = NULL;
	uint64_t off = 0, next, val, wait;
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK), ep = epoll_create1(0);
	int wfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK), writer_ready = 1, intact = 1;

	srv.efd = eventfd(0, EFD_NONBLOCK);
	for (int i = 0, f[3] = { tfd, srv.efd, wfd }; i < 3; i++)
		epoll_ctl(ep, EPOLL_CTL_ADD, f[i],
			  &(struct epoll_event){ .events = EPOLLIN, .data.fd = f[i] });
	if (us_engine_create(NULL, &e) || /* the defaults: polled mode, CLOCK_MONOTONIC */
	    us_domain_create(e, NULL, "app", 0, &d) || us_domain_set_limit(d, US_LIMIT_MAX, MAX) ||
	    us_backend_create(e, &ops, NULL, &srv.be) || us_object_create(srv.be, d, NULL, &o))
		return fprintf(stderr, "polled: setup failed\n"), 1;
	while (!sync || us_sync_done(sync) != 1) { /* until the sync of the whole file is done */
		if (writer_ready && off < SIZE) {
			int rc = write_one(o, off, &wait);
			if (rc < 0)
				return fprintf(stderr, "polled: the writer failed\n"), 1;
			off += rc ? BUF : 0;
			if (!rc || wait)
				writer_ready = 0, arm(wfd, wait, 0);
		} else if (off == SIZE && !sync) {
			us_object_sync_start(o, NULL, NULL, &sync); /* -ENOMEM: next turn */
		}
		us_engine_poll(e, 0, &next); /* writeback, commits, sync steps: the work due */
		arm(tfd, next, 1);
		int n = epoll_wait(ep, ev, 3, writer_ready && off < SIZE ? 0 : -1);
		for (int i = 0; i < n; i++) {
			(void)!read(ev[i].data.fd, &val, sizeof(val)); /* drain it */
			if (ev[i].data.fd == srv.efd)
				srv_reply(); /* completions: the next turn polls again */
			else if (ev[i].data.fd == wfd && us_object_balance(o, &val) == 0)
				writer_ready = 1; /* the pause is over, the gate open */
			else if (ev[i].data.fd == wfd)
				arm(wfd, val, 0); /* still at the dirty limit */
		}
	}
	us_sync_free(sync);
	us_domain_stats(d, &st);
	if (us_object_destroy(o) || us_backend_destroy(srv.be) || us_engine_destroy(e))
		return fprintf(stderr, "polled: teardown failed\n"), 1;
	for (uint64_t i = 0; i < SIZE; i++) /* did every byte reach the disk intact? */
		intact &= srv.disk[i] == PATTERN(i);
	printf("polled: 16 MiB %s, %llu commits; peak charged %llu of %u KiB\n",
	       intact ? "durable, intact" : "NOT DURABLE", (unsigned long long)srv.commits,
	       (unsigned long long)st.peak_charged_bytes >> 10, MAX >> 10);
	return intact && st.peak_charged_bytes <= MAX && st.peak_charged_bytes > 0 ? 0 : 1;
}
