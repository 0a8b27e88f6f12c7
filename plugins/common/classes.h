/* classes.h — how the shipped classifiers (mlp, cnn, resnet) choose their
 * number of classes. Header only: each plugin compiles it in (hidden
 * visibility), nothing is exported.
 */
#ifndef SCORCH_PLUGINS_CLASSES_H
#define SCORCH_PLUGINS_CLASSES_H

#include <scorch/plugin.h>

/* The default when neither the model arg nor the dataset says. */
enum { CLASSES_DEFAULT = 10 };

/* The logits a classifier makes: the model arg classes= when given
 * (`asked` > 0), else the dataset's class count (sc_spec_classes, ABI
 * 1.4), else CLASSES_DEFAULT. Where both are known they must agree: a
 * mismatch is an error naming both. `model` names the plugin. */
static inline sc_status classes_choose(const char *model, int64_t asked,
                                       const sc_sample_spec *data, int64_t *classes)
{
    int64_t given = sc_spec_classes(data);
    if (given == 1 || given < 0)
        return sc_error_set(SC_ERR_INVALID, "%s: the dataset's targets have %lld classes; a "
                            "classifier needs 2 or more", model, (long long)given);
    if (asked > 0 && given > 0 && asked != given)
        return sc_error_set(SC_ERR_INVALID, "%s: model arg classes=%lld, but the dataset's "
                            "targets have %lld classes (leave classes= out to take the "
                            "dataset's)", model, (long long)asked, (long long)given);
    *classes = asked > 0 ? asked : given > 0 ? given : CLASSES_DEFAULT;
    return SC_OK;
}

#endif
