#include "base/format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void host_format_double(double v, char *buf, size_t n)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

