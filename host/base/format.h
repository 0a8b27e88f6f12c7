/* format.h — numbers and text as the host writes them into config.ini,
 * messages, logs and CSV files, so that what it writes reads back to the
 * same value. */
#ifndef SCORCH_HOST_FORMAT_H
#define SCORCH_HOST_FORMAT_H

#include <stddef.h>
#include <stdio.h>

/* The shortest %g text that reads back as v. */
void host_format_double(double v, char *buf, size_t n);

/* A CSV field, quoted (RFC 4180) when it holds a comma, quote or newline. */
void host_csv_field(FILE *f, const char *s);

#endif
