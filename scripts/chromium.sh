#!/usr/bin/env bash
# Installs Debian's chromium for the UI browser test (tests/integration/uibrowser)
# when it is missing, and prints its path. Idempotent: with chromium present it
# only prints the path. Needs root (CI and the developer machines run as root);
# without it, or without apt, it says so and exits 1, and the test skips with
# that message.
set -euo pipefail
for c in chromium chromium-browser; do
  if p="$(command -v "$c")"; then echo "$p"; exit 0; fi
done
if ! command -v apt-get >/dev/null; then
  echo "chromium is not installed and there is no apt-get to install it" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "chromium is not installed; run as root, or: sudo apt-get install -y chromium" >&2
  exit 1
fi
echo "installing chromium (apt-get install -y chromium) ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
command -v chromium
