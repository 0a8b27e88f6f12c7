/* --init-from, --init-map, --init-strict and --freeze on a parameter
 * store (host/run/init_from.h), from safetensors files and scorch
 * checkpoints written here. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/safetensors.h"
#include "run/init_from.h"
#include "scorch/serialize.h"

static char dir[64];
static sc_params *ps;

/* The model: fc.weight [2, 3], fc.bias [2] and the buffer bn.running_mean
 * [2], every value 0. */
static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/scorch-init-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    ps = sc_params_new();
    cr_assert_not_null(sc_params_add(ps, "fc.weight", 2, (int64_t[]){2, 3}));
    cr_assert_not_null(sc_params_add(ps, "fc.bias", 1, (int64_t[]){2}));
    cr_assert_not_null(sc_params_add_buffer(ps, "bn.running_mean", 1, (int64_t[]){2}));
}

static void teardown(void)
{
    sc_params_free(ps);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(init_from, .init = setup, .fini = teardown);

static float weight[6] = {1, 2, 3, 4, 5, 6}, bias[2] = {-1, -2}, mean[2] = {0.5f, 0.25f};

static sc_tensor f32(int ndim, const int64_t *shape, void *data)
{
    sc_tensor t;
    cr_assert_eq(sc_tensor_init(&t, SC_F32, ndim, shape), SC_OK);
    t.data = data;
    return t;
}

/* A safetensors file of the named tensors; NULL names end the list. */
static const char *write_file(const char *file, const host_safetensors_entry *e, int n)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    cr_assert_eq(host_safetensors_write(path, e, n, NULL, 0), SC_OK, "%s", sc_error_message());
    return path;
}

/* The model's three tensors under the names given. */
static const char *model_file(const char *w, const char *b, const char *m)
{
    static sc_tensor tw, tb, tm;
    tw = f32(2, (int64_t[]){2, 3}, weight);
    tb = f32(1, (int64_t[]){2}, bias);
    tm = f32(1, (int64_t[]){2}, mean);
    host_safetensors_entry e[] = {{w, &tw}, {b, &tb}, {m, &tm}};
    return write_file("model.safetensors", e, 3);
}

typedef struct loaded {
    sc_status status;
    char *info, *notes;
} loaded;

static loaded load(const char *path, const char *map, bool strict)
{
    host_config cfg;
    host_config_defaults(&cfg);
    snprintf(cfg.init_from, sizeof cfg.init_from, "%s", path);
    snprintf(cfg.init_map, sizeof cfg.init_map, "%s", map);
    cfg.init_strict = strict;
    loaded r = {0};
    size_t a, b;
    FILE *info = open_memstream(&r.info, &a), *notes = open_memstream(&r.notes, &b);
    r.status = host_init_from_load(&cfg, ps, info, notes);
    fclose(info);
    fclose(notes);
    return r;
}

static void loaded_free(loaded *r)
{
    free(r->info);
    free(r->notes);
}

static float value(const char *name, int i)
{
    return sc_params_find(ps, name)->data ? ((float *)sc_params_find(ps, name)->data)[i] : -99;
}

static void expect_message(const char *part)
{
    cr_assert(strstr(sc_error_message(), part), "'%s' not in:\n%s", part, sc_error_message());
}

Test(init_from, loads_every_parameter_and_buffer_by_name)
{
    loaded r = load(model_file("fc.weight", "fc.bias", "bn.running_mean"), "", true);
    cr_assert_eq(r.status, SC_OK, "%s", sc_error_message());
    cr_assert_eq(value("fc.weight", 5), 6);
    cr_assert_eq(value("fc.bias", 1), -2);
    cr_assert_eq(value("bn.running_mean", 0), 0.5f);
    cr_assert(strstr(r.info, "initialised 3 of the model's 3 parameters and buffers from"),
              "%s", r.info);
    cr_assert_str_eq(r.notes, "");
    loaded_free(&r);
}

Test(init_from, loads_a_scorch_checkpoints_params)
{
    char path[128];
    snprintf(path, sizeof path, "%s/run.ckpt", dir);
    sc_ckpt_writer *w;
    sc_tensor tw = f32(2, (int64_t[]){2, 3}, weight), tb = f32(1, (int64_t[]){2}, bias);
    sc_tensor tm = f32(1, (int64_t[]){2}, mean), moment = f32(1, (int64_t[]){2}, bias);
    cr_assert_eq(sc_ckpt_writer_open(path, &w), SC_OK);
    cr_assert_eq(sc_ckpt_write_tensor(w, "param/fc.weight", &tw), SC_OK);
    cr_assert_eq(sc_ckpt_write_tensor(w, "param/fc.bias", &tb), SC_OK);
    cr_assert_eq(sc_ckpt_write_tensor(w, "param/bn.running_mean", &tm), SC_OK);
    cr_assert_eq(sc_ckpt_write_tensor(w, "optim/m", &moment), SC_OK); /* not a weight */
    cr_assert_eq(sc_ckpt_write_blob(w, "model", "mlp", 3), SC_OK);
    cr_assert_eq(sc_ckpt_writer_commit(w), SC_OK);
    loaded r = load(path, "", true);
    cr_assert_eq(r.status, SC_OK, "%s", sc_error_message());
    cr_assert_eq(value("fc.weight", 0), 1);
    cr_assert_eq(value("bn.running_mean", 1), 0.25f);
    cr_assert(strstr(r.info, "(a scorch checkpoint)"), "%s", r.info);
    loaded_free(&r);
}

/* One message lists what is missing, unexpected and shaped otherwise. */
Test(init_from, strict_refuses_listing_every_fault)
{
    sc_tensor tw = f32(2, (int64_t[]){3, 2}, weight), tb = f32(1, (int64_t[]){2}, bias);
    host_safetensors_entry e[] = {{"fc.weight", &tw}, {"fc.bias", &tb}, {"head.bias", &tb}};
    loaded r = load(write_file("unfit.safetensors", e, 3), "", true);
    cr_assert_eq(r.status, SC_ERR_INVALID);
    expect_message("does not fit the model (rename with --init-map, or load what fits with "
                   "--no-init-strict)");
    expect_message("not in the file (1): bn.running_mean");
    expect_message("not in the model (1): head.bias");
    expect_message("shaped otherwise (1): fc.weight (file F32 [3, 2], model [2, 3])");
    cr_assert_eq(value("fc.bias", 0), 0, "a refusal loads nothing");
    loaded_free(&r);
}

Test(init_from, non_strict_loads_what_fits_and_notes_the_rest)
{
    sc_tensor tw = f32(2, (int64_t[]){3, 2}, weight), tb = f32(1, (int64_t[]){2}, bias);
    host_safetensors_entry e[] = {{"fc.weight", &tw}, {"fc.bias", &tb}, {"head.bias", &tb}};
    loaded r = load(write_file("unfit.safetensors", e, 3), "", false);
    cr_assert_eq(r.status, SC_OK, "%s", sc_error_message());
    cr_assert_eq(value("fc.bias", 0), -1);
    cr_assert_eq(value("fc.weight", 0), 0, "shaped otherwise: kept");
    cr_assert(strstr(r.notes, "1 parameter not in"), "%s", r.notes);
    cr_assert(strstr(r.notes, "keeps the model's own initialisation: bn.running_mean"), "%s",
              r.notes);
    cr_assert(strstr(r.notes, "the model does not have, skipped: head.bias"), "%s", r.notes);
    cr_assert(strstr(r.notes, "shaped otherwise than the model's, skipped: fc.weight (file F32 "
                     "[3, 2], model [2, 3])"), "%s", r.notes);
    cr_assert(strstr(r.info, "initialised 1 of the model's 3"), "%s", r.info);
    loaded_free(&r);
}

Test(init_from, non_strict_refuses_a_file_where_nothing_fits)
{
    loaded r = load(model_file("a", "b", "c"), "", false);
    cr_assert_eq(r.status, SC_ERR_INVALID);
    expect_message("none of its 3 tensors fits a parameter of the model");
    loaded_free(&r);
}

Test(init_from, map_renames_and_drops)
{
    sc_tensor tw = f32(2, (int64_t[]){2, 3}, weight), tb = f32(1, (int64_t[]){2}, bias);
    sc_tensor tm = f32(1, (int64_t[]){2}, mean);
    int64_t count = 7;
    sc_tensor tn;
    cr_assert_eq(sc_tensor_init(&tn, SC_I64, 0, NULL), SC_OK);
    tn.data = &count;
    host_safetensors_entry e[] = {{"0.weight", &tw}, {"0.bias", &tb}, {"1.running_mean", &tm},
                                  {"1.num_batches_tracked", &tn}};
    const char *path = write_file("torch.safetensors", e, 4);
    loaded r = load(path, "0.*=fc.*,*.num_batches_tracked=,1.*=bn.*", true);
    cr_assert_eq(r.status, SC_OK, "%s", sc_error_message());
    cr_assert_eq(value("fc.weight", 2), 3);
    cr_assert_eq(value("bn.running_mean", 0), 0.5f);
    loaded_free(&r);

    r = load(path, "0.*=fc.*,1.*=bn.*", true); /* num_batches_tracked stays */
    cr_assert_eq(r.status, SC_ERR_INVALID);
    expect_message("not in the model (1): 1.num_batches_tracked (as bn.num_batches_tracked)");
    loaded_free(&r);

    r = load(path, "0.*=fc.*,*.num_batches_tracked=,1.*=bn.*,conv*=x*", true);
    cr_assert_eq(r.status, SC_ERR_INVALID);
    expect_message("--init-map rule 'conv*=x*' matches no tensor of");
    loaded_free(&r);

    r = load(path, "0.weight=fc.bias,0.bias=fc.bias", false);
    cr_assert_eq(r.status, SC_ERR_INVALID);
    expect_message("'0.bias'");
    expect_message("'0.weight'");
    expect_message("would both load as 'fc.bias'");
    loaded_free(&r);
}

Test(init_from, half_precision_converts_and_integers_do_not_load)
{
    uint16_t halves[2] = {0x3c00, 0xc000}; /* 1, -2 */
    int64_t ints[2] = {1, 2};
    /* The writer writes scorch's dtypes only: an F16 file by hand. */
    char path[128];
    snprintf(path, sizeof path, "%s/half.safetensors", dir);
    const char header[] = "{\"fc.bias\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                          "\"bn.running_mean\":{\"dtype\":\"I64\",\"shape\":[2],"
                          "\"data_offsets\":[4,20]}}";
    FILE *f = fopen(path, "wb");
    uint64_t len = sizeof header - 1;
    fwrite(&len, 8, 1, f);
    fwrite(header, 1, len, f);
    fwrite(halves, 2, 2, f);
    fwrite(ints, 8, 2, f);
    fclose(f);
    loaded r = load(path, "", false);
    cr_assert_eq(r.status, SC_OK, "%s", sc_error_message());
    cr_assert_eq(value("fc.bias", 0), 1);
    cr_assert_eq(value("fc.bias", 1), -2);
    cr_assert(strstr(r.notes, "bn.running_mean (file I64 [2], model [2])"), "%s", r.notes);
    loaded_free(&r);
}

Test(init_from, a_damaged_file_is_refused_naming_it)
{
    char path[128];
    snprintf(path, sizeof path, "%s/junk.bin", dir);
    FILE *f = fopen(path, "wb");
    fputs("not a weights file at all", f);
    fclose(f);
    loaded r = load(path, "", true);
    cr_assert_eq(r.status, SC_ERR_FORMAT);
    char start[160];
    snprintf(start, sizeof start, "--init-from: %s: its header length", path);
    cr_assert(strncmp(sc_error_message(), start, strlen(start)) == 0, "%s",
              sc_error_message());
    loaded_free(&r);
    r = load("/nonexistent/w.safetensors", "", true);
    cr_assert_eq(r.status, SC_ERR_IO);
    expect_message("--init-from: cannot read /nonexistent/w.safetensors");
    loaded_free(&r);
}

Test(init_from, freeze_clears_trainable_on_matching_parameters)
{
    cr_assert_eq(host_freeze_apply("fc.w*", ps), SC_OK, "%s", sc_error_message());
    cr_assert_not(sc_params_find(ps, "fc.weight")->flags & SC_TENSOR_REQUIRES_GRAD);
    cr_assert(sc_params_find(ps, "fc.bias")->flags & SC_TENSOR_REQUIRES_GRAD);
    cr_assert_eq(sc_params_trainable_numel(ps), 2);
    cr_assert_eq(host_freeze_apply("*.bias, fc.*", ps), SC_OK, "%s", sc_error_message());
    cr_assert_eq(sc_params_trainable_numel(ps), 0);
    cr_assert_eq(host_freeze_apply("", ps), SC_OK);
}

Test(init_from, freeze_refuses_a_glob_that_matches_no_parameter)
{
    cr_assert_eq(host_freeze_apply("fc.*,conv1.*", ps), SC_ERR_INVALID);
    expect_message("--freeze 'conv1.*' matches no parameter of the model (it has fc.weight, "
                   "fc.bias)");
    cr_assert_eq(host_freeze_apply("bn.*", ps), SC_ERR_INVALID, "buffers never train");
}

Test(init_from, options_that_need_init_from)
{
    host_config cfg;
    host_config_defaults(&cfg);
    cr_assert_eq(host_init_check(&cfg), SC_OK);
    snprintf(cfg.init_map, sizeof cfg.init_map, "a=b");
    cr_assert_eq(host_init_check(&cfg), SC_ERR_INVALID);
    expect_message("--init-map needs --init-from FILE");
    cfg.init_map[0] = '\0';
    cfg.init_strict = false;
    cr_assert_eq(host_init_check(&cfg), SC_ERR_INVALID);
    expect_message("--no-init-strict needs --init-from FILE");
    snprintf(cfg.init_from, sizeof cfg.init_from, "w.safetensors");
    cr_assert_eq(host_init_check(&cfg), SC_OK);
}
