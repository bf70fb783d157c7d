#!/bin/bash
# The real `cloud-init schema` for the tests (issue 19): Debian's own cloud-init package, unpacked (never installed:
# no unit, no hook runs on this machine) into $TERRAVIXENS_CACHE/cloud-init/<version>, its Python dependencies in a
# venv beside it. Prints nothing when it is there already. Run by `make setup-test`; tests/cloud_init.py finds it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${TERRAVIXENS_CACHE:-$HOME/.cache/terravixens}/cloud-init
stamp=$cache/.installed-$(sha256sum "$here/requirements.txt" "$here/install.sh" | sha256sum | cut -c1-12)
[ -e "$stamp" ] && exit 0
rm -rf "$cache" && mkdir -p "$cache/download"
cd "$cache/download"
apt-get download cloud-init >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get download cloud-init >/dev/null; }
dpkg -x cloud-init_*_all.deb "$cache/root"
python3 -m venv "$cache/venv"
"$cache/venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
version=$(dpkg-deb -f cloud-init_*_all.deb Version)
cat > "$cache/cloud-init" <<SCRIPT
#!/bin/sh
# Debian's cloud-init $version, unpacked by tools/cloud-init/install.sh
PYTHONPATH="$cache/root/usr/lib/python3/dist-packages" exec "$cache/venv/bin/python" "$cache/root/usr/bin/cloud-init" "\$@"
SCRIPT
chmod 755 "$cache/cloud-init"
"$cache/cloud-init" --version >/dev/null
touch "$stamp"
echo "[cloud-init] Debian cloud-init $version for 'cloud-init schema': $cache/cloud-init"
