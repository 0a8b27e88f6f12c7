#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "scorch/args.h"

static sc_args *parse(const char *text)
{
    sc_args *a = NULL;
    cr_assert_eq(sc_args_parse(text, "model arg", &a), SC_OK, "'%s': %s", text,
                 sc_error_message());
    cr_assert_not_null(a);
    return a;
}

static void assert_message_has(const char *fragment)
{
    cr_assert(strstr(sc_error_message(), fragment), "message '%s' lacks '%s'",
              sc_error_message(), fragment);
}

static void assert_parse_fails(const char *text, const char *fragment)
{
    sc_args *a = (sc_args *)1;
    sc_error_clear();
    cr_assert_eq(sc_args_parse(text, "model arg", &a), SC_ERR_INVALID, "'%s' parsed", text);
    cr_assert_null(a);
    assert_message_has(fragment);
}

Test(args, parses_trimmed_pairs_in_order)
{
    sc_args *a = parse(" hidden = 256:128 ,dropout=0.1,, path=a=b ,empty=");
    cr_assert_eq(sc_args_count(a), 4, "empty pairs are skipped");
    cr_assert_str_eq(sc_args_key(a, 0), "hidden");
    cr_assert_str_eq(sc_args_value(a, 0), "256:128");
    cr_assert_str_eq(sc_args_key(a, 1), "dropout");
    cr_assert_str_eq(sc_args_get(a, "path"), "a=b", "the first '=' splits");
    cr_assert_str_eq(sc_args_get(a, "empty"), "");
    cr_assert_null(sc_args_get(a, "Hidden"), "keys are case-sensitive");
    sc_args_free(a);
}

Test(args, empty_and_null_text_have_no_pairs)
{
    sc_args *a = parse("");
    cr_assert_eq(sc_args_count(a), 0);
    sc_args_free(a);
    a = parse(NULL);
    cr_assert_eq(sc_args_count(a), 0);
    sc_args_free(a);
    a = parse(" , ,");
    cr_assert_eq(sc_args_count(a), 0);
    sc_args_free(a);
}

Test(args, malformed_text_is_refused)
{
    assert_parse_fails("hidden=1,dropout", "model arg 'dropout': expected key=value");
    assert_parse_fails(" =5", "empty key");
    assert_parse_fails("a=1,b=2,a=3", "model arg 'a' is given twice");
    char many[64 * 8 + 16] = "";
    size_t used = 0;
    for (int i = 0; i <= 64; i++)
        used += (size_t)snprintf(many + used, sizeof many - used, "k%d=1,", i);
    assert_parse_fails(many, "more than 64 pairs");
}

Test(args, int_reads_value_or_default)
{
    sc_args *a = parse("n=-42,big=9000000000,bad=12abc,over=99999999999999999999,e=");
    int64_t v = 0;
    cr_assert_eq(sc_args_int(a, "n", 7, &v), SC_OK);
    cr_assert_eq(v, -42);
    cr_assert_eq(sc_args_int(a, "big", 7, &v), SC_OK);
    cr_assert_eq(v, 9000000000LL);
    cr_assert_eq(sc_args_int(a, "absent", 7, &v), SC_OK);
    cr_assert_eq(v, 7);
    cr_assert_eq(sc_args_int(a, "bad", 7, &v), SC_ERR_INVALID);
    assert_message_has("model arg 'bad': '12abc' is not an integer");
    cr_assert_eq(sc_args_int(a, "over", 7, &v), SC_ERR_INVALID);
    assert_message_has("'over'");
    cr_assert_eq(sc_args_int(a, "e", 7, &v), SC_ERR_INVALID, "an empty value is no integer");
    sc_args_free(a);
}

Test(args, float_reads_value_or_default)
{
    sc_args *a = parse("lr=1e-3,p=0.25,bad=0.1.2,word=abc");
    double v = 0;
    cr_assert_eq(sc_args_float(a, "lr", 1.0, &v), SC_OK);
    cr_assert_float_eq(v, 1e-3, 0.0);
    cr_assert_eq(sc_args_float(a, "p", 1.0, &v), SC_OK);
    cr_assert_float_eq(v, 0.25, 0.0);
    cr_assert_eq(sc_args_float(a, "absent", 0.5, &v), SC_OK);
    cr_assert_float_eq(v, 0.5, 0.0);
    cr_assert_eq(sc_args_float(a, "bad", 1.0, &v), SC_ERR_INVALID);
    assert_message_has("'bad': '0.1.2' is not a number");
    cr_assert_eq(sc_args_float(a, "word", 1.0, &v), SC_ERR_INVALID);
    sc_args_free(a);
}

Test(args, bool_accepts_the_usual_spellings)
{
    sc_args *a = parse("a=true,b=False,c=YES,d=off,e=1,f=0,g=maybe");
    const char *keys = "abcdef";
    const bool want[] = {true, false, true, false, true, false};
    for (int i = 0; i < 6; i++) {
        char key[2] = {keys[i], '\0'};
        bool v = !want[i];
        cr_assert_eq(sc_args_bool(a, key, !want[i], &v), SC_OK, "%s", key);
        cr_assert_eq(v, want[i], "%s", key);
    }
    bool v = false;
    cr_assert_eq(sc_args_bool(a, "absent", true, &v), SC_OK);
    cr_assert(v);
    cr_assert_eq(sc_args_bool(a, "g", true, &v), SC_ERR_INVALID);
    assert_message_has("'g': 'maybe' is not a boolean");
    sc_args_free(a);
}

Test(args, int_lists)
{
    sc_args *a = parse("hidden=256:128:64,one=10,bad=256:x");
    int64_t out[3] = {-1, -1, -1};
    int n = -1;
    cr_assert_eq(sc_args_ints(a, "hidden", out, 3, &n), SC_OK);
    cr_assert_eq(n, 3);
    cr_assert(out[0] == 256 && out[1] == 128 && out[2] == 64);
    cr_assert_eq(sc_args_ints(a, "one", out, 3, &n), SC_OK);
    cr_assert_eq(n, 1);
    cr_assert_eq(out[0], 10);
    out[0] = -1;
    cr_assert_eq(sc_args_ints(a, "absent", out, 3, &n), SC_OK);
    cr_assert_eq(n, 0);
    cr_assert_eq(out[0], -1, "absent leaves out untouched");
    cr_assert_eq(sc_args_ints(a, "hidden", out, 2, &n), SC_ERR_INVALID);
    assert_message_has("more than 2 values");
    cr_assert_eq(sc_args_ints(a, "bad", out, 3, &n), SC_ERR_INVALID);
    assert_message_has("'x' is not an integer");
    sc_args_free(a);
}

Test(args, check_known_names_the_first_unknown_key)
{
    sc_args *a = parse("hidden=1,extra=2,dropuot=0.1");
    static const char *const known[] = {"hidden", "dropout", NULL};
    cr_assert_eq(sc_args_check_known(a, known), SC_ERR_INVALID);
    assert_message_has("unknown model arg 'extra' (known: hidden, dropout)");
    static const char *const all[] = {"extra", "dropuot", "hidden", NULL};
    cr_assert_eq(sc_args_check_known(a, all), SC_OK);
    static const char *const none[] = {NULL};
    cr_assert_eq(sc_args_check_known(a, none), SC_ERR_INVALID);
    assert_message_has("(known: none)");
    sc_args_free(a);
    a = parse("");
    cr_assert_eq(sc_args_check_known(a, none), SC_OK, "no keys, nothing unknown");
    sc_args_free(a);
}

Test(args, check_known_suggests_the_key_a_typo_meant)
{
    static const char *const known[] = {"hidden", "classes", "dropout", NULL};
    sc_args *a = parse("hiden=3");
    cr_assert_eq(sc_args_check_known(a, known), SC_ERR_INVALID);
    assert_message_has("unknown model arg 'hiden' (did you mean 'hidden'? known: hidden, "
                       "classes, dropout)");
    sc_args_free(a);
    a = parse("dropuot=0.1");
    cr_assert_eq(sc_args_check_known(a, known), SC_ERR_INVALID);
    assert_message_has("(did you mean 'dropout'?");
    sc_args_free(a);
    a = parse("depth=3");
    cr_assert_eq(sc_args_check_known(a, known), SC_ERR_INVALID);
    cr_assert_null(strstr(sc_error_message(), "did you mean"), "'depth' is no typo: %s",
                   sc_error_message());
    sc_args_free(a);
}

Test(args, a_list_written_with_commas_is_told_lists_use_colons)
{
    assert_parse_fails("hidden=64,32", "model arg '32': expected key=value; if it continues "
                       "hidden's list, lists use ':' (hidden=64:32)");
    assert_parse_fails("dropout=0.1,hidden=64,32,16", "(hidden=64:32)");
    assert_parse_fails("64,32", "model arg '64': expected key=value");
    cr_assert_null(strstr(sc_error_message(), "lists use"), "nothing before it to continue: %s",
                   sc_error_message());
}
