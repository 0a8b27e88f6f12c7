/* duration.c — "2h30m", "90m", "45s", plain seconds (duration.h). */
#include "base/duration.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char UNITS[] = "dhms";
static const double UNIT_SECONDS[] = {86400, 3600, 60, 1};

static sc_status bad_duration(const char *text)
{
    return sc_error_set(SC_ERR_INVALID,
                        "'%.64s' is not a duration: give plain seconds (5400) or numbers with "
                        "units d, h, m, s in that order (2h30m, 90m, 45s, 1d12h)",
                        text);
}

/* A non-negative decimal number at *p (no sign, no exponent: "1e3m" is
 * no duration); advances *p past it. */
static bool read_number(const char **p, double *value)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s) && !(*s == '.' && isdigit((unsigned char)s[1])))
        return false;
    size_t len = strspn(s, "0123456789.");
    char *end;
    *value = strtod(s, &end);
    if (end != s + len) /* a second '.' */
        return false;
    *p = end;
    return true;
}

sc_status host_duration_parse(const char *text, double *seconds)
{
    const char *p = text;
    double total = 0, value;
    size_t next_unit = 0; /* units must come in UNITS' order, each once */
    if (!read_number(&p, &value))
        return bad_duration(text);
    if (*p == '\0') /* plain seconds */
        total = value;
    while (*p) { /* here a unit follows a number */
        const char *unit = strchr(UNITS + next_unit, *p);
        if (!unit)
            return bad_duration(text);
        next_unit = (size_t)(unit - UNITS) + 1;
        total += value * UNIT_SECONDS[unit - UNITS];
        p++;
        /* after a unit: the end, or a number and its unit */
        if (*p && (!read_number(&p, &value) || *p == '\0'))
            return bad_duration(text);
    }
    if (!isfinite(total))
        return bad_duration(text);
    *seconds = total;
    return SC_OK;
}

sc_status host_duration_check(const char *text)
{
    double seconds;
    return host_duration_parse(text, &seconds);
}
