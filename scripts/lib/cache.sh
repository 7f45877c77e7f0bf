# Sourced by the build scripts: the folder the tools built from the pinned Go
# modules are cached in (the control plane, helm, golangci-lint), once per
# machine rather than once per clone: $LEASETUNE_CACHE, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/leasetune; the clone's git-ignored .cache/
# when that cannot be made. Every path below it names the tool's version,
# and every binary is written under a temporary name and renamed, so clones
# of different commits share it safely.
leasetune_cache() {
  local dir="${LEASETUNE_CACHE:-${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/leasetune}"
  if mkdir -p "$dir" 2>/dev/null && [[ -w "$dir" ]]; then
    echo "$dir"
  else
    mkdir -p "$root/.cache"
    echo "$root/.cache"
  fi
}
