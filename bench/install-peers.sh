#!/usr/bin/env bash
# Installs the peer tools that `ringio bench copy` compares ringio with: rsync, hyperfine, fio and
# xxhsum (Debian's xxhash) from apt, xcp, fcp, cpz and b3sum with cargo (the two-pass peers of a
# verified copy: `cp -a`, then b3sum or xxhsum over the copy). Idempotent: whatever is already on PATH (or in
# ~/.cargo/bin) is skipped. Not run by CI.
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"

have() { command -v "$1" >/dev/null 2>&1; }

install_apt_packages() {
  local missing=()
  for tool in rsync hyperfine fio; do
    if have "$tool"; then echo "present: $tool"; else missing+=("$tool"); fi
  done
  if have xxhsum; then echo "present: xxhsum"; else missing+=(xxhash); fi
  [ "${#missing[@]}" -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "apt-get install ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
}

install_cargo_crates() {
  local missing=()
  for crate in xcp fcp cpz b3sum; do   # the binary has the crate's name; cpz is from the fuc project
    if have "$crate"; then echo "present: $crate"; else missing+=("$crate"); fi
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  if ! have cargo; then
    echo "cargo not found: install Rust (https://rustup.rs), then rerun for ${missing[*]}" >&2
    return 1
  fi
  for crate in "${missing[@]}"; do
    echo "cargo install $crate"
    cargo install --locked "$crate" || cargo install "$crate"
  done
}

install_apt_packages
install_cargo_crates
echo "peer tools ready"
