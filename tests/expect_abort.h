/*
 * Runs a function in a child process, its standard error into a pipe, and
 * tells whether it died of SIGABRT saying every given string: for the lock
 * order witnesses' tests, which stop a thread that takes locks out of order.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef US_EXPECT_ABORT_H
#define US_EXPECT_ABORT_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs fn(k) in a child; true when it died of SIGABRT and its standard
 * error held want1 and want2. What it said is left in msg (len bytes). */
static inline bool expect_abort(void (*fn)(int k), int k, const char *want1, const char *want2,
				char *msg, size_t len)
{
	ssize_t n, got = 0;
	int fds[2], status;
	pid_t pid;

	msg[0] = '\0';
	if (pipe(fds) != 0)
		return false;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		fn(k);
		_exit(0); /* not reached when the witness stops it */
	}
	close(fds[1]);
	while ((n = read(fds[0], msg + got, len - 1 - (size_t)got)) > 0)
		got += n;
	msg[got] = '\0';
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid)
		return false;
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(msg, want1) &&
	       strstr(msg, want2);
}

#endif
