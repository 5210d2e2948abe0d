#!/usr/bin/env bash
# Installs what WoTbench needs on a fresh Debian machine, idempotently:
#   - Debian packages (compiler, libcoap 4.3.1 static library and tools, collectl, iproute2,
#     nftables, nginx: the reference HTTP server under test, clang with libFuzzer) when running as root; a clear
#     message with the command otherwise;
#   - the Python virtual environment .venv with the package and its test dependencies.
# Called by the Makefile before build, test, run and bench. Fast when nothing is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(gcc make libc6-dev libcoap3-dev libcoap3-bin libssl-dev collectl iproute2 nftables nginx)
PYTHON=${PYTHON:-python3}
APT_PACKAGES+=(wrk)   # the HTTP benchmark's peer (bench/http_bench.py)
APT_PACKAGES+=(clang libclang-rt-14-dev)   # the C parsers' libFuzzer targets (make fuzz, make test)
APT_PACKAGES+=(nodejs)   # the Thing Description Directory (Domus, configs/td-directory.yaml) runs its jsonld.js with node
# connected devices (docs/CONNECTED.md) and issue 35 (docs/PLATFORMS.md): WebSocket framing in C
# (the devices' connections, the notification sink's WebSocket side); systems under test that
# hold connections, notify or store entities — nginx's nchan module (pub/sub: WebSocket, SSE,
# chunked subscribers), webdis + redis-server (entities over HTTP)
APT_PACKAGES+=(libwslay-dev libnginx-mod-nchan webdis redis-server curl xz-utils)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ]; then
    echo "bootstrap: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "bootstrap: missing Debian packages: ${missing[*]}" >&2
    echo "bootstrap: install them with:  sudo apt-get install --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

# Debian 13's webdis beside Debian 12's (applications on their own WebSockets, docs/CONNECTED.md);
# says why and goes on when it cannot be installed: it never fails the build
bash scripts/webdis-debian13.sh || echo "bootstrap: webdis-debian13 not installed (see above)" >&2

# The venv is rebuilt only when pyproject.toml changes (the stamp holds its hash).
stamp=.venv/.wotbench-stamp
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if ! "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 10)' 2>/dev/null; then
    echo "bootstrap: WoTbench needs Python >= 3.10 as '$PYTHON' (set PYTHON=...)" >&2
    exit 1
  fi
  if [ ! -x .venv/bin/python ]; then
    if ! "$PYTHON" -m venv .venv 2>/dev/null; then
      echo "bootstrap: '$PYTHON -m venv' failed; on Debian install python3-venv (as root: apt-get install python3-venv)" >&2
      exit 1
    fi
  fi
  echo "bootstrap: installing the Python package and its dependencies into .venv"
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e '.[test]'
  echo "$want" > "$stamp"
fi
