/* GET /api/v1/events: the event plane's state (see events_routes.c). */
#ifndef CRESCENT_HTTP_EVENTS_ROUTES_H
#define CRESCENT_HTTP_EVENTS_ROUTES_H

struct cr_http_front;
struct cr_subsystems;

/* Adds GET /api/v1/events; its handler asks the publisher and the replay
 * actor named in `peers`.  Returns CR_OK or the front's error. */
int cr_events_register_routes(struct cr_http_front *front, struct cr_subsystems *peers);

#endif
