/*
 * unstable — version of the headers.
 *
 * SPDX-License-Identifier: MIT
 *
 * GENERATED from include/unstable/version.h.in by CMakeLists.txt, from the
 * version given to project(): edit that, not this file. The generated file is
 * committed so that the sources also build without CMake.
 */
#ifndef UNSTABLE_VERSION_H
#define UNSTABLE_VERSION_H

#define US_VERSION_MAJOR 0
#define US_VERSION_MINOR 1
#define US_VERSION_PATCH 0
#define US_VERSION_STRING "0.1.0"

#endif /* UNSTABLE_VERSION_H */
