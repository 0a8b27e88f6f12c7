/* whole_file.h — reading a whole file into memory for the raw-input
 * readers (image.c, csv.c). Private to libscorch. */
#ifndef SCORCH_SDK_WHOLE_FILE_H
#define SCORCH_SDK_WHOLE_FILE_H

#include <stddef.h>

#include "scorch/status.h"

/* The regular file at path, at most max bytes, into *bytes (malloc'd,
 * NUL-terminated past its *size bytes). Refused, without naming path (the
 * caller does): unreadable (a missing file, a folder: SC_ERR_IO), or
 * larger than max (SC_ERR_FORMAT: "<size> bytes is more than <too_large>"). */
sc_status sc_whole_file_read(const char *path, size_t max, const char *too_large, char **bytes,
                             size_t *size);

#endif
