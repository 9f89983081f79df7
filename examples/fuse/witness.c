/*
 * unstable-fuse: the lock order witness's one piece of state (witness.h).
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include "ufuse.h"

#ifdef US_WITNESS
_Thread_local unsigned ufs_witness_held;
#else
/* ISO C wants something in a translation unit. */
typedef int ufs_witness_unused;
#endif
