/* HTTP routes of copy/move tasks: GET /api/v1/tasks (every task in flight
 * and the finished ones kept) and GET /api/v1/tasks/{id}.  Handlers ask the
 * tasks actor (CR_MSG_TASKS_ADMIN), which renders the JSON on its thread. */
#ifndef CRESCENT_HTTP_TASK_ROUTES_H
#define CRESCENT_HTTP_TASK_ROUTES_H

#include <stdint.h>

#include "core/store.h"
#include "core/task_table.h"

struct cr_http_front;
struct cr_subsystems;

/* On the tasks actor's thread: renders one task (id) or all (id NULL) into
 * *json_out (malloc'd).  Returns CR_OK, CR_ERR_OBJECT_NOT_FOUND or
 * CR_ERR_NOMEM. */
int cr_task_routes_render(const struct cr_task_table *table, uint64_t now_ms,
                          const struct cr_uuid *id, char **json_out);

/* Parses "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" or 32 hex digits.  Returns
 * CR_OK or CR_ERR_INVALID_PARAMS. */
int cr_task_id_parse(const char *text, struct cr_uuid *out);

/* Writes the dashed form (37 bytes with the NUL). */
void cr_task_id_format(const struct cr_uuid *id, char out[37]);

int cr_task_routes_register(struct cr_http_front *front, struct cr_subsystems *peers);

#endif
