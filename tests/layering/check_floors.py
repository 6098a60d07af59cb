#!/usr/bin/env python3
"""ARCHITECTURE.md's floors table against the build: every module the build
makes has a row, and what each row says it uses (with what those use) is
what its CMake USES gives it. So the map a newcomer reads is the one the
compiler enforces.

  check_floors.py ARCHITECTURE.md USES_FILE    (USES_FILE: "module: use use ..." lines, written by CMake)
"""
import re
import sys


def closure(direct, module):
    seen, todo = set(), list(direct.get(module, []))
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(direct.get(m, []))
    return seen


def main():
    doc, uses_file = sys.argv[1], sys.argv[2]
    built = {}
    for line in open(uses_file):
        name, _, uses = line.partition(":")
        built[name.strip()] = uses.split()
    text = open(doc).read()
    table = text[text.index("## The floors"):text.index("## Where to add")]
    documented = {}
    for row in re.finditer(r"^\| `([a-z_]+)` \|[^|]*\|([^|]*)\|", table, re.M):
        documented[row.group(1)] = re.findall(r"[a-z_]+", row.group(2))
    errors = []
    for module in built:
        if module not in documented:
            errors.append(f"{module}: built, but ARCHITECTURE.md's floors table has no row for it")
    for module, uses in documented.items():
        if module == "cli":
            continue  # "every module"
        if module not in built:
            errors.append(f"{module}: in ARCHITECTURE.md's floors table, but the build makes no such module")
            continue
        want = closure(built, module)
        said = set(uses) | set().union(*(closure(built, u) for u in uses if u in built))
        if said != want:
            errors.append(f"{module}: ARCHITECTURE.md says it uses {sorted(said)}, the build gives it {sorted(want)}")
    for e in errors:
        print(e)
    print(f"{len(built)} modules, {len(errors)} disagreements")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
