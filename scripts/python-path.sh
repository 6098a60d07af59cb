#!/usr/bin/env bash
# After `make`: lets Debian's /usr/bin/python3 `import gpumem` from the build
# folder, through a .pth file in the user's site-packages (nothing is copied;
# rebuilding updates what Python imports). `pip install ./bindings/python`
# installs a copy instead (docs/python.md).
set -euo pipefail
build_dir=${1:-build}
python=${PYTHON:-/usr/bin/python3}
package="$build_dir/python/gpumem"
[[ -f "$package/__init__.py" && -x "$python" ]] || exit 0
site=$("$python" -c 'import site; print(site.getusersitepackages() if site.ENABLE_USER_SITE else "")')
[[ -n "$site" ]] || exit 0
target="$(cd "$build_dir/python" && pwd)"
pth="$site/gpumem-build.pth"
if [[ ! -f "$pth" || "$(cat "$pth")" != "$target" ]]; then
  mkdir -p "$site"
  printf '%s\n' "$target" > "$pth.tmp" && mv "$pth.tmp" "$pth"
  echo "gpumem: $python now imports gpumem from $target (via $pth)"
fi
