/* Unit tests for the copy/move task table (src/core/task_table.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/task_table.h"
#include "crescent/error.h"

static struct cr_uuid id_of(uint32_t n) {
    struct cr_uuid id = {{0}};
    memcpy(id.b, &n, sizeof(n));
    id.b[15] = 0xaa;
    return id;
}

static const struct cr_uuid EXEC = {{7}};

static void test_add_find_update(void **state) {
    (void)state;
    struct cr_task_table *t = NULL;
    assert_int_equal(cr_task_table_create(4, 4, &t), CR_OK);
    struct cr_uuid a = id_of(1), b = id_of(2);
    struct cr_task *ta, *tb, *dup;
    int detail;
    assert_int_equal(cr_task_table_add(t, &a, CR_TASK_COPY, &EXEC, 1000, 5000, &detail, &ta),
                     CR_OK);
    assert_int_equal(cr_task_table_add(t, &b, CR_TASK_MOVE, &EXEC, 1001, 5001, NULL, &tb), CR_OK);
    assert_int_equal(cr_task_table_add(t, &a, CR_TASK_COPY, &EXEC, 1002, 5002, NULL, &dup),
                     CR_ERR_OBJECT_ALREADY_EXISTS);
    assert_ptr_equal(cr_task_table_find(t, &a), ta);
    assert_ptr_equal(cr_task_table_find(t, &b), tb);
    struct cr_uuid c = id_of(3);
    assert_null(cr_task_table_find(t, &c));
    assert_int_equal(ta->status, CR_TASK_PENDING);
    assert_ptr_equal(ta->detail, &detail);
    cr_task_table_update(t, ta, CR_TASK_PROCESSING, "fetched", 1500);
    assert_int_equal(ta->status, CR_TASK_PROCESSING);
    assert_string_equal(ta->message, "fetched");
    assert_int_equal(ta->created_epoch_ms, 1000);
    assert_int_equal(ta->updated_epoch_ms, 1500);
    assert_int_equal(cr_task_table_active_count(t), 2);
    ta->detail = NULL;
    cr_task_table_finish(t, ta, CR_TASK_SUCCESS, "done", 1600);
    assert_int_equal(cr_task_table_active_count(t), 1);
    assert_ptr_equal(cr_task_table_active_at(t, 0), tb);
    assert_int_equal(cr_task_table_finished_count(t), 1);
    assert_ptr_equal(cr_task_table_find(t, &a), ta); /* kept for QueryTask */
    assert_int_equal(ta->status, CR_TASK_SUCCESS);
    assert_string_equal(cr_task_status_name(ta->status), "SUCCESS");
    assert_string_equal(cr_task_type_name(tb->type), "REPLICA_MOVE");
    cr_task_table_destroy(t);
}

static void test_active_bound(void **state) {
    (void)state;
    struct cr_task_table *t = NULL;
    assert_int_equal(cr_task_table_create(3, 2, &t), CR_OK);
    struct cr_task *task;
    for (uint32_t i = 0; i < 3; i++) {
        struct cr_uuid id = id_of(i);
        assert_int_equal(cr_task_table_add(t, &id, CR_TASK_COPY, &EXEC, 0, 0, NULL, &task),
                         CR_OK);
    }
    struct cr_uuid more = id_of(99);
    assert_int_equal(cr_task_table_add(t, &more, CR_TASK_COPY, &EXEC, 0, 0, NULL, &task),
                     CR_ERR_NOMEM);
    assert_null(cr_task_table_find(t, &more)); /* nothing half-added */
    cr_task_table_destroy(t);
    assert_int_equal(cr_task_table_create(0, 2, &t), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_task_table_create(2, 0, &t), CR_ERR_INVALID_PARAMS);
}

/* Finishing more tasks than the retention bound drops the oldest finished
 * ones first, and every other task stays findable (backward-shift deletion
 * keeps the probe chains whole). */
static void test_retention_drops_oldest(void **state) {
    (void)state;
    enum { KEEP = 50, TOTAL = 1000, ACTIVE = 8 };
    struct cr_task_table *t = NULL;
    assert_int_equal(cr_task_table_create(ACTIVE, KEEP, &t), CR_OK);
    for (uint32_t i = 0; i < TOTAL; i++) {
        struct cr_uuid id = id_of(i);
        struct cr_task *task;
        assert_int_equal(cr_task_table_add(t, &id, CR_TASK_COPY, &EXEC, i, i, NULL, &task), CR_OK);
        cr_task_table_finish(t, task, i % 2 ? CR_TASK_FAILED : CR_TASK_SUCCESS, NULL, i + 1);
        assert_true(cr_task_table_finished_count(t) <= KEEP);
        for (uint32_t j = 0; j <= i; j++) {
            struct cr_uuid old = id_of(j);
            const struct cr_task *found = cr_task_table_find(t, &old);
            if (i - j < KEEP)
                assert_true(found != NULL && found->created_epoch_ms == j);
            else
                assert_null(found);
        }
    }
    assert_int_equal(cr_task_table_finished_count(t), KEEP);
    assert_int_equal(cr_task_table_dropped(t), TOTAL - KEEP);
    assert_int_equal(cr_task_table_finished_at(t, 0)->created_epoch_ms, TOTAL - KEEP);
    assert_int_equal(cr_task_table_finished_at(t, KEEP - 1)->created_epoch_ms, TOTAL - 1);
    cr_task_table_destroy(t);
}

/* Tasks finished out of order: the active array stays dense and exact. */
static void test_finish_out_of_order(void **state) {
    (void)state;
    struct cr_task_table *t = NULL;
    assert_int_equal(cr_task_table_create(16, 4, &t), CR_OK);
    struct cr_task *tasks[16];
    for (uint32_t i = 0; i < 16; i++) {
        struct cr_uuid id = id_of(i);
        assert_int_equal(cr_task_table_add(t, &id, CR_TASK_MOVE, &EXEC, i, i, NULL, &tasks[i]),
                         CR_OK);
    }
    for (uint32_t i = 0; i < 16; i += 3) cr_task_table_finish(t, tasks[i], CR_TASK_FAILED, "x", 99);
    uint32_t n = cr_task_table_active_count(t);
    assert_int_equal(n, 16 - 6);
    for (uint32_t i = 0; i < n; i++) {
        const struct cr_task *a = cr_task_table_active_at(t, i);
        assert_true(a->status == CR_TASK_PENDING && a->created_epoch_ms % 3 != 0);
    }
    /* The ring keeps the last four finished, oldest first. */
    assert_int_equal(cr_task_table_finished_count(t), 4);
    assert_int_equal(cr_task_table_finished_at(t, 0)->created_epoch_ms, 6);
    assert_int_equal(cr_task_table_finished_at(t, 3)->created_epoch_ms, 15);
    cr_task_table_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_find_update),
        cmocka_unit_test(test_active_bound),
        cmocka_unit_test(test_retention_drops_oldest),
        cmocka_unit_test(test_finish_out_of_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
