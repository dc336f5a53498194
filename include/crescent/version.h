/* crescent's version, shared by the daemon, the CLI and libcrescent. */
#ifndef CRESCENT_VERSION_H
#define CRESCENT_VERSION_H

#define CRESCENT_VERSION "0.1.0"

#endif
