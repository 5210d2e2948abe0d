#!/usr/bin/env bash
# Installs `webdis-debian13`: Debian 13's webdis (0.1.22) beside Debian 12's, for applications on
# their own WebSockets (docs/CONNECTED.md). Debian 12's webdis 0.1.9 closes a WebSocket once it
# has answered its first command that is not a SUBSCRIBE (fixed upstream in 0.1.17), so each
# application could send one RPC.
#
# Debian 13's binary packages webdis and libhiredis1.1.0 (the only library Debian 12 lacks; the
# binary needs glibc >= 2.34, Debian 12 has 2.36) are fetched from the Debian archive, checked
# against the suite's signed InRelease (gpgv with debian-archive-keyring) and the Packages
# index's SHA256, and unpacked into /usr/local/lib/wotbench/webdis-debian13; the command
# /usr/local/bin/webdis-debian13 runs that binary with its library. Nothing is added to the tree.
#
# Idempotent and fast once installed. As non-root it says what to run. When the archive cannot
# be reached it says so and exits 0: what needs the program then says it is missing (the e2e
# test skips naming why; configs/attached-devices-webdis-wsapps.yaml's check refuses).
set -euo pipefail

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
LIBDIR=/usr/local/lib/wotbench/webdis-debian13
BIN=/usr/local/bin/webdis-debian13
ARCH=$(dpkg --print-architecture)
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

if [ -x "$BIN" ] && [ -x "$LIBDIR/webdis" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "webdis-debian13: not installed; as root run: bash scripts/webdis-debian13.sh" >&2
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
give_up() {
  echo "webdis-debian13: $*; not installed (applications on their own WebSockets through webdis need it)" >&2
  exit 0
}
fetch() { curl -fsS --max-time 120 -o "$2" "$MIRROR/$1"; }

# field of one package's paragraph in a Packages index
field() { awk -v p="$2" -v f="$3:" '$1=="Package:"{on=($2==p)} on && $1==f {print $2; exit}' "$1"; }

fetch "dists/$SUITE/InRelease" "$tmp/InRelease" || give_up "cannot fetch $MIRROR/dists/$SUITE/InRelease"
gpgv --keyring "$KEYRING" --output "$tmp/Release" "$tmp/InRelease" 2>"$tmp/gpgv.log" \
  || give_up "the signature of $SUITE's InRelease does not verify ($(tail -1 "$tmp/gpgv.log"))"
grep -qx "Codename: $SUITE" "$tmp/Release" || give_up "the signed Release is not $SUITE's"
index="main/binary-$ARCH/Packages.xz"
want=$(awk -v f="$index" '/^SHA256:/{on=1; next} /^[A-Za-z]/{on=0} on && $3==f {print $1; exit}' "$tmp/Release")
[ -n "$want" ] || give_up "$SUITE's Release lists no $index"
fetch "dists/$SUITE/$index" "$tmp/Packages.xz" || give_up "cannot fetch $index"
echo "$want  $tmp/Packages.xz" | sha256sum -c --quiet - || give_up "$index does not match its signed SHA256"
xz -dc "$tmp/Packages.xz" > "$tmp/Packages" || give_up "cannot unpack $index (xz-utils)"

mkdir -p "$tmp/root"
for pkg in webdis libhiredis1.1.0; do
  file=$(field "$tmp/Packages" "$pkg" Filename)
  sum=$(field "$tmp/Packages" "$pkg" SHA256)
  [ -n "$file" ] && [ -n "$sum" ] || give_up "$SUITE has no package $pkg for $ARCH"
  fetch "$file" "$tmp/$pkg.deb" || give_up "cannot fetch $file"
  echo "$sum  $tmp/$pkg.deb" | sha256sum -c --quiet - || give_up "$file does not match its SHA256"
  dpkg-deb -x "$tmp/$pkg.deb" "$tmp/root" || give_up "cannot unpack $file"
done
version=$(field "$tmp/Packages" webdis Version)

mkdir -p "$(dirname "$LIBDIR")"
new=$(mktemp -d "$LIBDIR.new.XXXXXX")      # its own: two bootstraps at once do not collide
trap 'rm -rf "$tmp" "$new"' EXIT
mkdir -p "$new/lib"
cp "$tmp/root/usr/bin/webdis" "$new/webdis" || give_up "webdis $version has no usr/bin/webdis"
cp -a "$tmp/root/usr/lib/"*/libhiredis* "$new/lib/" || give_up "libhiredis1.1.0 has no library"
echo "$version" > "$new/VERSION"
LD_LIBRARY_PATH="$new/lib" ldd "$new/webdis" > "$tmp/ldd" 2>&1 || give_up "ldd cannot read webdis $version"
if grep -q "not found" "$tmp/ldd"; then
  give_up "Debian $SUITE's webdis $version needs libraries this host lacks: $(grep 'not found' "$tmp/ldd" | tr -s ' \n' ' ')"
fi
chmod -R a+rX "$new"
rm -rf "$LIBDIR"
mv "$new" "$LIBDIR"
cat > "$BIN" <<EOF
#!/bin/sh
# Debian $SUITE's webdis $version with its libhiredis (installed by WoTbench's scripts/webdis-debian13.sh)
LD_LIBRARY_PATH="$LIBDIR/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$LIBDIR/webdis" "\$@"
EOF
chmod 755 "$BIN"
echo "webdis-debian13: installed Debian $SUITE's webdis $version as $BIN"
