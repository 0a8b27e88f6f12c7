#include "scorch/plugin.h"

const char *sc_split_name(sc_split split)
{
    switch (split) {
    case SC_SPLIT_TRAIN: return "train";
    case SC_SPLIT_VALID: return "valid";
    case SC_SPLIT_TEST: return "test";
    default: return "?";
    }
}
