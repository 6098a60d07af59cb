#!/usr/bin/env bash
# Issue 46's goals, measured: the consistency matrix (questions asked by
# text, JSON and Python; pages compared with their text) and the flags that
# are silently ignored across every command x engine x method.
#   bench/one_answer_goals.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
export GPUMEM_CLI="$build/gpumem" PYTHONPATH="$build/python" GPUMEM_SOURCE_DIR="$PWD" PYTHONDONTWRITEBYTECODE=1
export GPUMEM_EXPORT_DIR="$build/python-exports"
questions=$(/usr/bin/python3 -c 'import sys; sys.path.insert(0, "bindings/python/tests"); import test_one_answer as t; print(len(t.QUESTIONS), len(t.PAGES))')
read -r asked pages <<<"$questions"
result=$(/usr/bin/python3 -m pytest -q -p no:cacheprovider bindings/python/tests/test_one_answer.py 2>&1 | tail -1)
echo "consistency matrix: $asked questions, each by CLI text, JSON and Python; $pages pages against their text: $result"
/usr/bin/python3 tests/cli/flag_matrix.py --gpumem "$build/gpumem" --source . | head -1
