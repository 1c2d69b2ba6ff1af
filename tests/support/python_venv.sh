#!/usr/bin/env bash
# Usage: tests/support/python_venv.sh 3.13
#
# Prints the path of a Python 3.13 that has dynalease, its test tools and the
# development tools (dev/: the invoke runner, the local Lambda control plane, the demo)
# installed, building the virtual environment .venv-3.13 at the repository's root on
# first use (and again when pyproject.toml or dev/pyproject.toml changes). The interpreter is the first of:
# $DYNALEASE_PYTHON_3_13, python3.13 on PATH, pyenv's versions/3.13.*.
# Exits 3, saying how to provide one, when no interpreter of that version is found.
set -euo pipefail

version="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.venv-$version"
variable="DYNALEASE_PYTHON_${version/./_}"

is_version() {
  [ -n "$1" ] && [ -x "$1" ] &&
    "$1" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" \
      2>/dev/null
}

find_python() {
  local candidate
  for candidate in "${!variable:-}" "$(command -v "python$version" || true)" \
    "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/"python$version"; do
    if is_version "$candidate"; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

if [ ! -f "$venv/.installed" ] || [ "$root/pyproject.toml" -nt "$venv/.installed" ] ||
  [ "$root/dev/pyproject.toml" -nt "$venv/.installed" ]; then
  if ! python="$(find_python)"; then
    echo "no Python $version found: install it (pyenv install $version) or set $variable" \
      "to its interpreter" >&2
    exit 3
  fi
  echo "make: building $venv with $python (dynalease and its test tools)" >&2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -e "$root[test]" -e "$root/dev" >&2
  touch "$venv/.installed"
fi
echo "$venv/bin/python"
