# Sourced by the samples' checks: installs this build into $work/stage,
# the way a user's `meson install` would, and sets $pc_dir (the folder of
# the staged scorch.pc) and $stage. Needs $meson, $build (absolute) and
# $work (a scratch folder).
#
# `meson install` writes the list of what it installed (what `meson
# uninstall` removes) into <build>/meson-logs/install-log.txt. So that the
# build keeps the record of a real install, the staging runs on a shadow
# of it: links to its outputs, with a meson-logs and a meson-private of its
# own (holding a link to install.dat, the list of what to install), as
# tests/integration/test_install.c does.
log=$build/meson-logs/install-log.txt
log_before=$(stat -c %y "$log" 2>/dev/null || echo none)
shadow=$work/build
mkdir "$shadow" "$shadow/meson-logs" "$shadow/meson-private"
for entry in "$build"/*; do
    case ${entry##*/} in
    meson-logs | meson-private) ;;
    *) ln -s "$entry" "$shadow/" ;;
    esac
done
ln -s "$build/meson-private/install.dat" "$shadow/meson-private/"
stage=$work/stage
"$meson" install --no-rebuild --quiet --destdir "$stage" -C "$shadow"
if [ "$(stat -c %y "$log" 2>/dev/null || echo none)" != "$log_before" ]; then
    echo "staging the install rewrote $log" >&2
    exit 1
fi
pc=$(find "$stage" -name scorch.pc)
[ -n "$pc" ] || { echo "no scorch.pc installed" >&2; exit 1; }
pc_dir=$(dirname "$pc")
