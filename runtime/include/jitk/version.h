/* jitk/version.h - the jitk version, for preprocessor checks. */
#ifndef JITK_VERSION_H
#define JITK_VERSION_H

#define JITK_VERSION_MAJOR 0
#define JITK_VERSION_MINOR 2
#define JITK_VERSION_PATCH 0
#define JITK_VERSION "0.2.0"
/* One number that grows with every release: 10000*major + 100*minor + patch. */
#define JITK_VERSION_NUMBER \
	(JITK_VERSION_MAJOR * 10000 + JITK_VERSION_MINOR * 100 + JITK_VERSION_PATCH)

#endif
