/* test_reports.h — for the emulator's own tests: reports counted and
 * captured instead of fatal. Each Criterion test runs in a process of its
 * own and the emulator reads its settings at first use, so a suite's init
 * calls capture_reports() before any CUDA call. */
#ifndef CUDAEMU_TEST_REPORTS_H
#define CUDAEMU_TEST_REPORTS_H

#include <criterion/criterion.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

/* The test's stderr, where the reports go. */
static int reports_fd = -1;

/* Reports printed and counted, not fatal; two GPUs for the cross-GPU rules;
 * stderr into a file reports_text() reads. */
static inline void capture_reports()
{
    setenv("CUDAEMU_REPORTS", "continue", 1);
    setenv("CUDAEMU_DEVICES", "2", 1);
    reports_fd = fileno(tmpfile());
    dup2(reports_fd, STDERR_FILENO);
}

/* What the reports said so far (pread: stderr's offset stays). */
static inline std::string reports_text()
{
    std::string text;
    char buf[4096];
    ssize_t got;
    while ((got = pread(reports_fd, buf, sizeof buf, (off_t)text.size())) > 0)
        text.append(buf, (size_t)got);
    return text;
}

static inline void expect_said(const std::string &text, const char *what)
{
    cr_expect(text.find(what) != std::string::npos, "the report should say \"%s\"; it said:\n%s",
              what, text.c_str());
}

#endif
