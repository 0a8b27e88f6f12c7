/* Parameter groups (host/base/param_groups.h): [params "PATTERN"] sections in
 * INI files and config.ini, --no-decay, which parameter takes which
 * setting, the typo errors, resume comparison, and the optimizer they
 * drive (one SGD step against its formula per group). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/param_groups.h"
#include "scorch/scorch.h"

/* conv.weight [4], conv.bias [2], bn.weight [2], bn.running_mean [2]
 * (a buffer), fc.weight [3], fc.bias [1]. */
static sc_params *make_store(void)
{
    sc_params *ps = sc_params_new();
    int64_t four = 4, two = 2, three = 3, one = 1;
    cr_assert_not_null(sc_params_add(ps, "conv.weight", 1, &four));
    cr_assert_not_null(sc_params_add(ps, "conv.bias", 1, &two));
    cr_assert_not_null(sc_params_add(ps, "bn.weight", 1, &two));
    cr_assert_not_null(sc_params_add_buffer(ps, "bn.running_mean", 1, &two));
    cr_assert_not_null(sc_params_add(ps, "fc.weight", 1, &three));
    cr_assert_not_null(sc_params_add(ps, "fc.bias", 1, &one));
    return ps;
}

static void load(host_config *cfg, const char *text)
{
    host_config_defaults(cfg);
    cr_assert_eq(host_config_load_ini_text(cfg, HOST_PROGRAM_TRAIN, text, "t.ini"), SC_OK, "%s",
                 sc_error_message());
}

static sc_status load_status(const char *text)
{
    host_config cfg;
    host_config_defaults(&cfg);
    return host_config_load_ini_text(&cfg, HOST_PROGRAM_TRAIN, text, "t.ini");
}

static const char *const two_sections = "[train]\nweight-decay = 0.1\n"
                                        "[params \"fc.*\"]\nlr_scale = 0.5\n"
                                        "[params \"*.bias\"]\nweight_decay = 0\n";

Test(param_groups, ini_sections_are_read_in_order)
{
    host_config cfg;
    load(&cfg, two_sections);
    const host_param_groups *g = &cfg.param_groups;
    cr_assert_eq(g->n, 2);
    cr_assert_str_eq(g->group[0].pattern, "fc.*");
    cr_assert(g->group[0].has_lr_scale && !g->group[0].has_weight_decay);
    cr_assert_eq(g->group[0].lr_scale, 0.5);
    cr_assert_str_eq(g->group[1].pattern, "*.bias");
    cr_assert(g->group[1].has_weight_decay && g->group[1].weight_decay == 0);
}

Test(param_groups, first_matching_section_wins_and_unset_keys_keep_defaults)
{
    host_config cfg;
    load(&cfg, two_sections);
    sc_params *ps = make_store();
    host_param_setting s[6];
    cr_assert_eq(host_param_groups_resolve(&cfg.param_groups, "bn", ps, 0.1, s), SC_OK, "%s",
                 sc_error_message());
    /* conv.weight: no section, no word */
    cr_assert(s[0].section == -1 && s[0].lr_scale == 1 && s[0].weight_decay == 0.1);
    /* conv.bias: "*.bias" */
    cr_assert(s[1].section == 1 && s[1].weight_decay == 0);
    /* bn.weight: --no-decay bn */
    cr_assert(s[2].section == -1 && s[2].weight_decay == 0 && s[2].word);
    /* fc.weight: "fc.*" sets lr_scale only */
    cr_assert(s[4].section == 0 && s[4].lr_scale == 0.5 && s[4].weight_decay == 0.1);
    /* fc.bias: "fc.*" is first, so "*.bias" does not apply: it keeps the decay */
    cr_assert(s[5].section == 0 && s[5].lr_scale == 0.5 && s[5].weight_decay == 0.1);
    sc_params_free(ps);
}

Test(param_groups, patterns_and_words_that_match_nothing_are_errors)
{
    host_config cfg;
    load(&cfg, "[params \"fc.wieght\"]\nlr_scale = 2\n");
    sc_params *ps = make_store();
    host_param_setting s[6];
    cr_assert_eq(host_param_groups_resolve(&cfg.param_groups, "", ps, 0, s), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "[params \"fc.wieght\"] matches no trainable"),
              "%s", sc_error_message());
    host_config_defaults(&cfg);
    cr_assert_eq(host_param_groups_resolve(&cfg.param_groups, "bias,norm", ps, 0, s),
                 SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "'norm' is in no trainable parameter's name"), "%s",
              sc_error_message());
    cr_assert_eq(host_param_groups_resolve(&cfg.param_groups, "bias,,bn", ps, 0, s),
                 SC_ERR_INVALID);
    /* a buffer is no trainable parameter */
    load(&cfg, "[params \"*running*\"]\nweight_decay = 0\n");
    cr_assert_eq(host_param_groups_resolve(&cfg.param_groups, "", ps, 0, s), SC_ERR_INVALID);
    sc_params_free(ps);
}

Test(param_groups, bad_sections_and_keys_are_errors_naming_them)
{
    cr_assert_eq(load_status("[params \"*.bias\"]\nlr_scael = 2\n"), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "t.ini:2: [params \"*.bias\"]: unknown key lr_scael "
                                         "(did you mean lr_scale?)"), "%s", sc_error_message());
    cr_assert_eq(load_status("[params *.bias]\nlr_scale = 2\n"), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "[params \"PATTERN\"]"), "%s", sc_error_message());
    cr_assert_eq(load_status("[params \"x\"]\nweight_decay = -1\n"), SC_ERR_INVALID);
    cr_assert_eq(load_status("[params \"x\"]\nlr_scale = 1\nlr_scale = 2\n"), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "set twice"), "%s", sc_error_message());
}

Test(param_groups, config_ini_writes_the_sections_back)
{
    host_config cfg, again;
    load(&cfg, two_sections);
    char *text = NULL;
    cr_assert_eq(host_config_ini_text(&cfg, HOST_PROGRAM_TRAIN, &text), SC_OK);
    cr_assert(strstr(text, "[params \"fc.*\"]\nlr_scale = 0.5\n"), "%s", text);
    load(&again, text);
    free(text);
    cr_assert_eq(memcmp(&again.param_groups, &cfg.param_groups, sizeof cfg.param_groups), 0);
    cr_assert_eq(host_config_resume_changes(&cfg, &again, NULL, NULL), 0);
}

Test(param_groups, resume_refuses_changed_sections)
{
    host_config saved, now;
    load(&saved, two_sections);
    load(&now, "[params \"fc.*\"]\nlr_scale = 0.25\n[params \"*.bias\"]\nweight_decay = 0\n");
    now.weight_decay = saved.weight_decay;
    now.origin[0] = saved.origin[0];
    cr_assert_eq(host_config_resume_changes(&saved, &now, NULL, NULL), 1);
}

/* The settings reach the optimizer: one plain SGD step (p -= lr * (g + wd
 * * p)) with every parameter's own lr scale and weight decay. */
Test(param_groups, drive_the_optimizer)
{
    host_config cfg;
    load(&cfg, two_sections);
    sc_params *ps = make_store();
    int64_t n = sc_params_numel(ps);
    float *p = sc_params_values(ps), *g = sc_params_grads(ps), *p0 = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        p[i] = p0[i] = 1.0f + 0.1f * (float)i;
        g[i] = 0.5f - 0.05f * (float)i;
    }
    memcpy(p0, p, (size_t)n * sizeof *p);
    sc_optim_config oc = sc_optim_defaults(SC_OPTIM_SGD);
    oc.weight_decay = 0.1;
    sc_optim *opt = sc_optim_new(ps, &oc);
    cr_assert_eq(host_param_groups_apply(&cfg.param_groups, "bn", ps, opt, 0.1), SC_OK, "%s",
                 sc_error_message());
    cr_assert_eq(sc_optim_step(opt, 0.1), SC_OK, "%s", sc_error_message());
    host_param_setting s[6];
    cr_assert_eq(host_param_groups_resolve(&cfg.param_groups, "bn", ps, 0.1, s), SC_OK);
    for (int i = 0; i < sc_params_count(ps); i++) {
        const sc_tensor *t = sc_params_at(ps, i);
        if (!(t->flags & SC_TENSOR_REQUIRES_GRAD))
            continue;
        for (int64_t k = 0, o = sc_params_offset(ps, i); k < t->numel; k++, o = o + 1) {
            float want = p0[o] - (float)(0.1 * s[i].lr_scale) *
                                     (g[o] + (float)s[i].weight_decay * p0[o]);
            cr_assert_float_eq(p[o], want, 1e-6f, "%s[%lld]: %g, want %g", t->name,
                               (long long)k, p[o], want);
        }
    }
    sc_optim_free(opt);
    sc_params_free(ps);
    free(p0);
}
