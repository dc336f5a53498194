/* When an idle actor should spin before it parks: spinning that pays for
 * itself.
 *
 * An idle actor can spin (burn its core, polling its rings) or park (sleep
 * on its eventfd).  Parking costs a park and a wake: the actor's membarrier
 * and poll, the sender's eventfd write, the scheduler's wake-up, on the
 * order of one default spin window (20 us) of CPU and latency together.
 * Spinning for a window W costs the CPU it burns: the gap g to the next
 * message when it comes within W (a hit), all of W when it does not (a
 * miss, which then parks anyway).  So spinning pays when
 *
 *     p * (C - g_hit) > (1 - p) * W
 *
 * with p the chance that work comes within W, g_hit the mean gap of hits and
 * C the cost of a park and wake, taken as W itself (the window is sized to
 * be that cost: the ski-rental choice).  The policy keeps p and g_hit as
 * moving averages (weight 1/8) of the gaps it is told about: every idle
 * period's length, whether it spun or parked.  A gap seen after a park is
 * longer than the true one by the wake's latency, which would keep a busy
 * actor believing it should not spin; so one idle period in
 * CR_SPIN_PROBE_EVERY spins anyway (a probe), and its gap is exact.
 *
 * Whether a core is free to spin on is the caller's question (the runtime
 * asks the kernel's run queue, see runtime.c): this file only weighs the
 * actor's own traffic.  Pure: no clock, no threads; the caller passes the
 * times, so tests drive it with made-up gaps. */
#ifndef CRESCENT_CORE_SPIN_POLICY_H
#define CRESCENT_CORE_SPIN_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#define CR_SPIN_PROBE_EVERY 16u /* one idle period in this many spins regardless */
#define CR_SPIN_ONE 65536u      /* fixed point: 1.0 for hit_q16 */

struct cr_spin_policy {
    uint64_t window_ns;   /* the longest spin (the runtime's spin_ns); 0: never spin */
    uint32_t hit_q16;     /* moving average of "work came within window_ns", Q16 */
    uint64_t hit_gap_ns;  /* moving average of the gaps that were hits */
    uint32_t since_probe; /* idle periods since the last spin */
};

/* Starts optimistic (p = 1, gaps of half a window): a fresh actor spins
 * until its traffic says otherwise. */
void cr_spin_policy_init(struct cr_spin_policy *p, uint64_t window_ns);

/* Whether spinning pays for the traffic seen so far (no probe, no counting). */
bool cr_spin_policy_pays(const struct cr_spin_policy *p);

/* An idle period starts: how long to spin before parking (0: park now).
 * Counts towards the next probe, so call it once per idle period. */
uint64_t cr_spin_policy_begin(struct cr_spin_policy *p);

/* The idle period ended with work `gap_ns` after it began (spun or parked).
 * Timers and stop requests are work too: the actor could not have slept
 * through them either. */
void cr_spin_policy_observe(struct cr_spin_policy *p, uint64_t gap_ns);

/* The runnable-thread count in the text of /proc/loadavg
 * ("0.52 0.58 0.59 3/245 1234": 3), or 0 when the text is not of that form. */
uint32_t cr_loadavg_runnable(const char *text);

#endif
