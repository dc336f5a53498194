/* crescentd's life: settings → runtime and actors → HTTP front → wait for
 * SIGINT/SIGTERM → stop intake → stop actors → free everything. */
#ifndef CRESCENT_DAEMON_DAEMON_H
#define CRESCENT_DAEMON_DAEMON_H

/* Runs crescentd; returns the process exit status (0 clean, 1 failure to
 * start, 2 bad usage or an address that cannot be bound). */
int cr_daemon_main(int argc, char **argv);

#endif
