/* --init-map's renaming rules and --freeze's glob lists
 * (host/base/name_map.h). */
#include <criterion/criterion.h>
#include <string.h>

#include "base/name_map.h"

/* What `name` becomes under `rules`, and which rule did it. */
static const char *mapped(const char *rules, const char *name, int *rule)
{
    static char out[256];
    host_name_map map;
    cr_assert_eq(host_name_map_parse(rules, &map), SC_OK, "%s: %s", rules, sc_error_message());
    cr_assert_eq(host_name_map_apply(&map, name, out, sizeof out, rule), SC_OK, "%s",
                 sc_error_message());
    return out;
}

Test(name_map, renames_by_the_first_matching_rule)
{
    int rule;
    cr_assert_str_eq(mapped("features.0.weight=conv1.weight", "features.0.weight", &rule),
                     "conv1.weight");
    cr_assert_eq(rule, 0);
    cr_assert_str_eq(mapped("features.0.weight=conv1.weight", "features.0.bias", &rule),
                     "features.0.bias");
    cr_assert_eq(rule, -1, "no rule: the name is kept");
    cr_assert_str_eq(mapped("a.*=x.*, a.b=never", "a.b", &rule), "x.b");
    cr_assert_eq(rule, 0, "the first rule wins");
    cr_assert_str_eq(mapped(" 1.* = fc1.* ,3.*=fc2.*", "3.bias", &rule), "fc2.bias");
    cr_assert_eq(rule, 1, "spaces around rules and '=' are ignored");
}

Test(name_map, stars_match_dots_and_carry_over_in_order)
{
    int rule;
    cr_assert_str_eq(mapped("features.*=conv*", "features.0.weight", &rule), "conv0.weight");
    cr_assert_str_eq(mapped("model.*=*", "model.layer1.bn.running_mean", &rule),
                     "layer1.bn.running_mean");
    cr_assert_str_eq(mapped("*.*.w=*_*", "a.b.c.w", &rule), "a_b.c", "the first * is lazy");
    cr_assert_str_eq(mapped("l*.b*.x=L*B*", "l1.b22.x", &rule), "L1B22");
    cr_assert_str_eq(mapped("*=p.*", "", &rule), "p.", "* matches nothing too");
    cr_assert_str_eq(mapped("a*b=*", "ab", &rule), "");
    cr_assert_str_eq(mapped("a*b=x*", "ab", &rule), "x");
    cr_assert_str_eq(mapped("x*=y*", "axb", &rule), "axb", "FROM matches the whole name");
    cr_assert_eq(rule, -1);
}

Test(name_map, an_empty_to_drops_the_tensor)
{
    int rule;
    cr_assert_str_eq(mapped("*.num_batches_tracked=", "bn1.num_batches_tracked", &rule), "");
    cr_assert_eq(rule, 0);
    cr_assert_str_eq(mapped("*.num_batches_tracked=", "bn1.running_var", &rule),
                     "bn1.running_var");
}

Test(name_map, malformed_rules_are_refused)
{
    static const struct {
        const char *rules, *message;
    } cases[] = {
        {"a", "rule 'a': write FROM=TO, with one '='"},
        {"a=b=c", "rule 'a=b=c': write FROM=TO"},
        {"a=b,,c=d", "an empty rule"},
        {"a=b,", "an empty rule"},
        {"=b", "rule '=b': FROM is empty"},
        {"a**=b**", "two '*' in a row"},
        {"a*=b", "FROM has 1 '*' and TO 0"},
        {"a=b*", "FROM has 0 '*' and TO 1"},
    };
    host_name_map map;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_expect_eq(host_name_map_parse(cases[i].rules, &map), SC_ERR_INVALID, "%s",
                     cases[i].rules);
        cr_expect(strstr(sc_error_message(), cases[i].message), "%s: '%s' not in '%s'",
                  cases[i].rules, cases[i].message, sc_error_message());
    }
    char many[1024] = "";
    for (int i = 0; i <= HOST_NAME_MAP_RULES; i++)
        strcat(many, i ? ",a=b" : "a=b");
    cr_assert_eq(host_name_map_check(many), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "more than 64 rules"), "%s", sc_error_message());
    cr_assert_eq(host_name_map_check(""), SC_OK);
}

Test(name_map, a_result_too_long_is_an_error)
{
    host_name_map map;
    char out[8];
    int rule;
    cr_assert_eq(host_name_map_parse("*=*.*.*", &map), SC_ERR_INVALID, "2 '*' for 1");
    cr_assert_eq(host_name_map_parse("a*=long.name.*", &map), SC_OK);
    cr_assert_eq(host_name_map_apply(&map, "abc", out, sizeof out, &rule), SC_ERR_INVALID);
    cr_assert_eq(host_name_map_apply(&map, "zzzzzzzzz", out, sizeof out, &rule),
                 SC_ERR_INVALID, "kept, but longer than out");
}

Test(name_map, glob_lists)
{
    cr_assert_eq(host_name_globs_check("fc1.*,*.bias"), SC_OK);
    cr_assert_eq(host_name_globs_check(""), SC_OK);
    cr_assert_eq(host_name_globs_check("fc1.*,,x"), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "an empty pattern"), "%s", sc_error_message());
    cr_assert_eq(host_name_globs_check("fc1.*, "), SC_ERR_INVALID);
    const char *item;
    size_t len;
    const char *rest = host_name_list_next(" a , b", &item, &len);
    cr_assert_eq(len, 1);
    cr_assert_eq(*item, 'a');
    cr_assert_null(host_name_list_next(rest, &item, &len));
    cr_assert_eq(len, 1);
    cr_assert_eq(*item, 'b');
}
