/* Mooncake's master endpoint (coro_rpc), an edge of the segments actor:
 * mc_edge.c, docs/mooncake.md. */
#ifndef CRESCENT_MOONCAKE_MC_EDGE_H
#define CRESCENT_MOONCAKE_MC_EDGE_H

struct cr_daemon_config;
struct cr_edge;

/* Binds --mooncake-rpc-address now (an address the user chose that cannot
 * be bound fails: CR_ERR_IO, said on stderr; the default address taken
 * leaves it off, said at wire; 'off' or '' serve nothing).  *out is set whenever the return is
 * CR_OK. */
int cr_mooncake_edge_create(const struct cr_daemon_config *config, struct cr_edge **out);

#endif
