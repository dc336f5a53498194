/* crescentd: see src/daemon/daemon.c and `crescentd --help`. */
#include "daemon/daemon.h"

int main(int argc, char **argv) { return cr_daemon_main(argc, argv); }
