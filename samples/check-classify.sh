#!/bin/sh
# Builds samples/classify the way a user does — out of tree, with its
# Makefile and pkg-config, against this build installed into a staging
# folder (stage-install.sh) — then trains an MLP on Fashion-MNIST for a
# moment, writes PNGs of the first test images, and checks that classify
# names for each the class scorch-test predicts for that sample, with the
# same probability; and that an unreadable input is one message naming it,
# the others still classified, and a failing exit status.
#
# Usage: check-classify.sh MESON BUILD_DIR SAMPLE_DIR SCORCH_TRAIN SCORCH_TEST FM_PNG DATASET_DIR
set -eu
meson=$1 build=$2 sample=$3 train=$4 test=$5 fm_png=$6 data=$7
images=8

build=$(cd "$build" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/scorch-classify-XXXXXX")
trap 'rm -rf "$work"' EXIT

. "$(dirname "$0")/stage-install.sh"

cp -R "$sample" "$work/classify"
libdir=$(dirname "$(find "$stage" -name libscorch.so | head -n 1)")
# A sanitizer build's libscorch needs its runtime loaded first: a program
# linking it is built with the same instrumentation, as its user would.
cc=${CC:-cc}
if readelf -d "$libdir/libscorch.so" | grep -q 'NEEDED.*libasan'; then
    cc="$cc -fsanitize=address,undefined"
fi
PKG_CONFIG_PATH=$pc_dir PKG_CONFIG_SYSROOT_DIR=$stage make -C "$work/classify" CC="$cc"

cd "$work"
"$train" --model "$build/plugins/mlp.so" --model-args hidden=64 \
    --dataset "$build/plugins/fashion_mnist.so" --dataset-path "$data" \
    --epochs 1 --max-train-iterations 100 --max-valid-iterations 2 --max-test-iterations 2 \
    --run-dir run --quiet
checkpoint=run/checkpoints/last.ckpt
"$test" --checkpoint "$checkpoint" --max-test-iterations 1 --batch-size $images \
    --predictions predictions.csv --quiet
"$fm_png" "$data" . $images

echo "not an image" > notes.txt
set +e
LD_LIBRARY_PATH=$libdir ./classify/classify "$checkpoint" test-*.png notes.txt \
    > classified.txt 2> errors.txt
status=$?
set -e
cat classified.txt errors.txt
[ "$status" = 1 ] || { echo "classify exited with $status, expected 1" >&2; exit 1; }
grep -q "^classify: .*notes.txt" errors.txt && [ "$(wc -l < errors.txt)" = 1 ] || {
    echo "expected one message naming notes.txt" >&2
    exit 1
}

# "test-3.png: Trouser (0.9876)" against row 3 of the predictions:
# sample,target,correct,pred_1,score_1,name_1,...
sed 's/^test-\([0-9]*\)\.png: \(.*\) (\([0-9.]*\))$/\1,\2,\3/' classified.txt |
awk -F, -v n=$images '
    NR == FNR { name[$1] = $2; prob[$1] = $3; next }
    FNR > 1 && ($1 in name) {
        d = prob[$1] - $5
        if (name[$1] != $6 || d > 2e-4 || d < -2e-4) {
            printf "test image %s: classify says %s (%s), scorch-test %s (%s)\n",
                   $1, name[$1], prob[$1], $6, $5 > "/dev/stderr"
            bad = 1
        }
        seen++
    }
    END { if (seen != n) { print seen " of " n " images compared" > "/dev/stderr"; bad = 1 }
          exit bad }' - predictions.csv
echo "classify agrees with scorch-test on $images test images"
