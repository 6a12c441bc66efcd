#!/bin/sh
# tools/install.sh PREFIX BUILD_DIR - what `ninja install` does. Honours
# DESTDIR. Installs the jitk CLI, libjitk (shared and static), jitk.h and
# jitk/*.h (version.h, and the typed-call headers the build generated from
# the specs: jitk/norm_scale_shift.h...), the specs and
# templates under share/jitk (where an installed jitk finds them with no
# environment set), and jitk.pc.
set -eu
prefix=$1
b=$2
root=${DESTDIR:-}$prefix
version=$(sed -n 's/^#define JITK_VERSION "\(.*\)"/\1/p' runtime/include/jitk/version.h)

install -d "$root/bin" "$root/lib/pkgconfig" "$root/include/jitk" \
	"$root/share/jitk/specs" "$root/share/jitk/templates" "$root/share/man/man1"
install -m 755 "$b/jitk" "$root/bin/jitk"
install -m 644 "$b/libjitk.a" "$root/lib/libjitk.a"
install -m 755 "$b/libjitk.so.$version" "$root/lib/libjitk.so.$version"
ln -sf "libjitk.so.$version" "$root/lib/libjitk.so.0"
ln -sf "libjitk.so.0" "$root/lib/libjitk.so"
install -m 644 runtime/include/jitk.h "$root/include/jitk.h"
install -m 644 runtime/include/jitk/*.h "$root/include/jitk/"
for h in "$b"/include/jitk/*.h; do
	[ -f "$h" ] && install -m 644 "$h" "$root/include/jitk/"
done
install -m 644 specs/*.yaml "$root/share/jitk/specs/"
install -m 644 templates/*.cuh "$root/share/jitk/templates/"
install -m 644 docs/jitk.1 "$root/share/man/man1/jitk.1"
cat >"$root/lib/pkgconfig/jitk.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: jitk
Description: JIT kernel compiler and loader for CUDA (NVRTC, Driver API)
Version: $version
Libs: -L\${libdir} -ljitk
Libs.private: -lyaml -lcrypto -lcurl -lhiredis -lnvrtc -ldl -lpthread -lm
Cflags: -I\${includedir}
PC
echo "installed jitk $version into $root"
