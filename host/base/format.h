/* format.h — numbers as the host writes them into config.ini, messages,
 * logs and CSV files (whose fields: sc_csv_write_field, scorch/csv.h), so
 * that what it writes reads back to the same value. */
#ifndef SCORCH_HOST_FORMAT_H
#define SCORCH_HOST_FORMAT_H

#include <stddef.h>

/* The shortest %g text that reads back as v. */
void host_format_double(double v, char *buf, size_t n);

#endif
