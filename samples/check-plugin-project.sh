#!/bin/sh
# Builds samples/plugin-project the way a user does — out of tree, with its
# Makefile and pkg-config, against an installed scorch (here this build,
# installed into a staging folder, leaving the build's record of a real
# install alone) — checks that each plugin exports only its ABI symbol,
# then trains it with this build's scorch-train and checks the test
# accuracy.
#
# Usage: check-plugin-project.sh MESON BUILD_DIR PROJECT_DIR SCORCH_TRAIN
set -eu
meson=$1 build=$2 project=$3 train=$4

build=$(cd "$build" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/scorch-sample-XXXXXX")
trap 'rm -rf "$work"' EXIT

. "$(dirname "$0")/stage-install.sh"

# The staged scorch.pc still says prefix=/usr/local; the sysroot puts the
# staging folder in front of its -I and -L paths.
cp -R "$project" "$work/project"
PKG_CONFIG_PATH=$pc_dir PKG_CONFIG_SYSROOT_DIR=$stage make -C "$work/project"

for plugin in gated:scorch_model_plugin spirals:scorch_dataset_plugin; do
    so=$work/project/${plugin%%:*}.so
    exports=$(nm -D --defined-only "$so" | awk '{print $3}')
    if [ "$exports" != "${plugin#*:}" ]; then
        echo "$so exports '$exports', expected only ${plugin#*:}" >&2
        exit 1
    fi
done

cd "$work/project"
"$train" --model ./gated.so --dataset ./spirals.so --epochs 30 --lr 0.01 \
    --run-dir run --quiet
accuracy=$(sed -n 's/.*"phase":"test".*"accuracy":\([0-9.e-]*\).*/\1/p' run/metrics.jsonl)
echo "spirals test accuracy: $accuracy"
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.9) }' || {
    echo "test accuracy '$accuracy' is not above 0.9" >&2
    exit 1
}
