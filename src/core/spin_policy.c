/* Spinning that pays for itself: the arithmetic of spin_policy.h. */
#include "core/spin_policy.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define WEIGHT_SHIFT 3u /* moving averages move 1/8 of the way per observation */

void cr_spin_policy_init(struct cr_spin_policy *p, uint64_t window_ns) {
    assert(p != NULL);
    *p = (struct cr_spin_policy){.window_ns = window_ns, .hit_q16 = CR_SPIN_ONE,
                                 .hit_gap_ns = window_ns / 2};
}

/* p * (C - g_hit) > (1 - p) * W, with C = W, in Q16 (both sides scaled by
 * 2^16; W is at most a few ms, so nothing overflows 64 bits). */
bool cr_spin_policy_pays(const struct cr_spin_policy *p) {
    assert(p->hit_q16 <= CR_SPIN_ONE);
    uint64_t w = p->window_ns;
    if (w == 0) return false;
    uint64_t saved = w > p->hit_gap_ns ? w - p->hit_gap_ns : 0;
    return (uint64_t)p->hit_q16 * saved > (uint64_t)(CR_SPIN_ONE - p->hit_q16) * w;
}

uint64_t cr_spin_policy_begin(struct cr_spin_policy *p) {
    assert(p != NULL);
    if (p->window_ns == 0) return 0;
    if (cr_spin_policy_pays(p) || ++p->since_probe >= CR_SPIN_PROBE_EVERY) {
        p->since_probe = 0;
        return p->window_ns;
    }
    return 0;
}

void cr_spin_policy_observe(struct cr_spin_policy *p, uint64_t gap_ns) {
    assert(p != NULL);
    bool hit = gap_ns <= p->window_ns;
    uint32_t target = hit ? CR_SPIN_ONE : 0;
    /* hit_q16 += (target - hit_q16) / 8, in unsigned arithmetic. */
    if (target > p->hit_q16)
        p->hit_q16 += (target - p->hit_q16 + (1u << WEIGHT_SHIFT) - 1) >> WEIGHT_SHIFT;
    else
        p->hit_q16 -= (p->hit_q16 - target) >> WEIGHT_SHIFT;
    if (hit) {
        if (gap_ns > p->hit_gap_ns)
            p->hit_gap_ns += (gap_ns - p->hit_gap_ns) >> WEIGHT_SHIFT;
        else
            p->hit_gap_ns -= (p->hit_gap_ns - gap_ns) >> WEIGHT_SHIFT;
    }
    assert(p->hit_q16 <= CR_SPIN_ONE);
}

uint32_t cr_loadavg_runnable(const char *text) {
    assert(text != NULL);
    /* Skip the three load averages to the "R/T" field. */
    const char *p = text;
    for (int field = 0; field < 3; field++) {
        p = strchr(p, ' ');
        if (p == NULL) return 0;
        p++;
    }
    char *end;
    unsigned long running = strtoul(p, &end, 10);
    if (end == p || *end != '/' || running > UINT32_MAX) return 0;
    return (uint32_t)running;
}
