#!/usr/bin/env python3
"""What libscorch.so exports is exactly what its headers declare.

    test_exports.py LIBSCORCH DIR=VERSION [DIR=VERSION ...]

Lists the functions declared in each DIR's headers (public ones:
sdk/include/scorch=SCORCH_1; host-only ones: sdk/host_include/scorch_host=
SCORCH_HOST_1) and the symbols LIBSCORCH defines in its dynamic symbol
table (readelf --dyn-syms), and fails, printing the drift, when a symbol is
exported but declared nowhere, a declaration is not exported, a symbol
carries another version than its header's, or a declaration lacks SC_API.
"""
import pathlib
import re
import subprocess
import sys


def strip_comments_and_directives(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"\\\n", " ", text)  # a directive's continuation lines
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
    return text.replace('extern "C" {', " ")


def top_level_statements(text):
    """The file-scope statements, bodies in braces left out: declarations
    end at ';', an inline function at its body's closing brace."""
    statements, current, depth, head = [], [], 0, ""
    for ch in text:
        if ch == "{":
            if depth == 0:
                head = "".join(current).strip()
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)  # extern "C"'s brace closes nothing
            if depth == 0 and head.endswith(")"):  # a function's body
                statements.append(head)
                current, head = [], ""
        elif depth == 0:
            if ch == ";":
                statements.append("".join(current).strip())
                current = []
            else:
                current.append(ch)
    return statements


def declared_functions(header):
    """{name: has SC_API} for the functions a header declares (not its
    typedefs, struct members or static inline functions)."""
    functions = {}
    for statement in top_level_statements(strip_comments_and_directives(header.read_text())):
        words = statement.split()
        if not words or words[0] in ("typedef", "static"):
            continue
        calls = [name for name in re.findall(r"(\w+)\s*\(", statement)
                 if name != "__attribute__"]
        if calls:
            functions[calls[0]] = "SC_API" in words
    return functions


def exported_symbols(library):
    """{name: version} for the symbols library defines in .dynsym (not
    the version nodes' own, absolute, symbols)."""
    out = subprocess.run(["readelf", "--dyn-syms", "--wide", library], check=True,
                         capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 8 or not fields[0][:-1].isdigit() or fields[6] in ("UND", "ABS"):
            continue
        name, _, version = fields[7].replace("@@", "@").partition("@")
        symbols[name] = version or "(none)"
    return symbols


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    library, groups = argv[1], [arg.split("=", 1) for arg in argv[2:]]
    declared, unmarked = {}, []
    for directory, version in groups:
        headers = sorted(pathlib.Path(directory).glob("*.h"))
        if not headers:
            sys.exit(f"test_exports: no headers in {directory}")
        for header in headers:
            shown = f"{header.parent.name}/{header.name}"  # scorch/context.h
            for name, marked in declared_functions(header).items():
                declared[name] = (version, shown)
                if not marked:
                    unmarked.append(f"{shown}: {name}")
    exported = exported_symbols(library)

    drift = {
        "exported but declared in no header": sorted(set(exported) - set(declared)),
        "declared but not exported": sorted(f"{declared[n][1]}: {n}"
                                            for n in set(declared) - set(exported)),
        "exported under another version than its header's": sorted(
            f"{n}@{exported[n]} (declared in {declared[n][1]}: {declared[n][0]})"
            for n in set(declared) & set(exported) if exported[n] != declared[n][0]),
        "declared without SC_API": sorted(unmarked),
    }
    for what, names in drift.items():
        if names:
            print(f"{what} ({len(names)}):")
            for name in names:
                print(f"  {name}")
    counts = ", ".join(f"{sum(1 for v, _ in declared.values() if v == version)} {version}"
                       for _, version in groups)
    if any(drift.values()):
        print(f"{library}: exports drift from the headers")
        return 1
    print(f"{library}: {len(exported)} exports, each declared ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
