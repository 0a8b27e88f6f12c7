/* whole_file.c — a whole file into memory (whole_file.h). */
#include "whole_file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

sc_status sc_whole_file_read(const char *path, size_t max, const char *too_large, char **bytes,
                             size_t *size)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f)
        return sc_error_set(SC_ERR_IO, "unreadable: %s", strerror(errno));
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return sc_error_set(SC_ERR_IO, "unreadable: not a file");
    }
    if ((size_t)st.st_size > max) {
        fclose(f);
        return sc_error_set(SC_ERR_FORMAT, "%lld bytes is more than %s", (long long)st.st_size,
                            too_large);
    }
    *size = (size_t)st.st_size;
    char *data = malloc(*size + 1);
    bool ok = data && fread(data, 1, *size, f) == *size;
    int err = errno;
    fclose(f);
    if (!data)
        return sc_error_set(SC_ERR_NOMEM, "out of memory reading %zu bytes", *size);
    if (!ok) {
        free(data);
        return sc_error_set(SC_ERR_IO, "unreadable: %s", strerror(err));
    }
    data[*size] = '\0';
    *bytes = data;
    return SC_OK;
}
