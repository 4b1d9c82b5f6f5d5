#!/usr/bin/env bash
# The public API as a user outside this tree gets it: `meson install` into a DESTDIR puts
# include/shesha/transport.h, libshesha and shesha.pc in place; a program compiled with
# `pkg-config --cflags --libs shesha` (and nothing else from this tree) runs against the installed
# library; the installed Python module imports and works.
# usage: test_api_install.sh BUILD_ROOT
set -uo pipefail
BUILD=$(readlink -f "${1:?usage}")
D=$(mktemp -d /tmp/shesha-api-install.XXXXXX)
failures=0
check() {  # check DESCRIPTION STATUS
    if [ "$2" -eq 0 ]; then echo "ok: $1"; else failures=$((failures + 1)); echo "FAIL: $1"; fi
}
cleanup() { if [ "$failures" -eq 0 ]; then rm -rf "$D"; else echo "artifacts kept in $D"; fi; }
trap cleanup EXIT

eval "$(meson introspect "$BUILD" --buildoptions | python3 -c '
import json, os, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
p = o["prefix"]
print("LIBDIR=" + os.path.join(p, o["libdir"]))
print("INCLUDEDIR=" + os.path.join(p, o["includedir"]))')"
meson install -C "$BUILD" --no-rebuild --destdir "$D/root" >"$D/install.log" 2>&1
check "meson install --destdir exits 0" $?
R=$D/root
check "header $INCLUDEDIR/shesha/transport.h installed" "$([ -s "$R$INCLUDEDIR/shesha/transport.h" ]; echo $?)"
check "shesha.pc installed" "$([ -s "$R$LIBDIR/pkgconfig/shesha.pc" ]; echo $?)"
check "libshesha.so installed" "$(ls "$R$LIBDIR"/libshesha.so* >/dev/null 2>&1; echo $?)"

cat > "$D/user.cpp" <<'CPP'
// A user's program: only <shesha/transport.h> and the installed library.
#include <shesha/transport.h>
#include <cstdio>
int main() {
    shesha::Environment env("CartPole-v1");
    env.reset(7);
    int steps = 0;
    for (bool done = false; !done; ++steps) {
        const shesha::StepResult r = env.step_discrete(steps % 2);
        done = r.terminated || r.truncated;
    }
    try {
        shesha::WorkerOptions o;
        o.config_path = "/nonexistent.yaml";
        shesha::WorkerTransport t(o);
    } catch (const shesha::Error& e) {
        std::printf("error: %s\n", e.what());
    }
    std::printf("shesha %s: CartPole-v1 episode of %d steps\n", shesha::version_string().c_str(), steps);
    return steps > 0 ? 0 : 1;
}
CPP
export PKG_CONFIG_PATH="$R$LIBDIR/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$R"
flags=$(pkg-config --cflags --libs shesha)
check "pkg-config --cflags --libs shesha: $flags" $?
g++ -std=c++20 "$D/user.cpp" -o "$D/user" $flags 2>"$D/compile.log"
check "a user program compiles and links against the installed library" $?
[ -s "$D/compile.log" ] && head -5 "$D/compile.log"
LD_LIBRARY_PATH="$R$LIBDIR" "$D/user" >"$D/user.log" 2>&1
check "it runs" $?
grep -q "^error: /nonexistent.yaml: cannot read the file$" "$D/user.log"
check "shesha::Error carries the message" $?
grep -q "^shesha [0-9.]*: CartPole-v1 episode of [0-9]* steps$" "$D/user.log"
check "environments work from the installed library" $?

mod=$(find "$R" -name 'shesha.cpython-*.so' | head -1)
if [ -n "$mod" ]; then
    PYTHONPATH=$(dirname "$mod") /usr/bin/python3 -c '
import shesha, numpy as np
e = shesha.Env("CartPole-v1"); e.reset(1)
obs, r, term, trunc = e.step(0)
assert obs.dtype == np.float32 and r == 1.0
print("python module", shesha.__version__, "ok")'
    check "the installed Python module imports and steps an environment" $?
else
    echo "python module not built: skipped"
fi
[ "$failures" -eq 0 ] && { echo "api install: all checks passed"; exit 0; }
echo "api install: $failures check(s) failed"; exit 1
