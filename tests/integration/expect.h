/* expect.h — the assertions the integration tests make on a program's
 * run (harness.h), for Criterion tests only: header-only, so that the
 * harness itself, which programs without Criterion link too, stays free
 * of it. */
#ifndef SCORCH_TESTS_EXPECT_H
#define SCORCH_TESTS_EXPECT_H

#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

/* The program exited with `status`; else its output shows why not. */
static inline void expect_status(const run_result *r, int status)
{
    cr_assert_eq(r->status, status, "exit %d, not %d\nstdout:\n%s\nstderr:\n%s", r->status,
                 status, r->out, r->err);
}

/* `part` is in text. */
static inline void expect_in(const char *text, const char *part)
{
    cr_assert(text && strstr(text, part), "'%s' not in:\n%s", part, text);
}

#endif
