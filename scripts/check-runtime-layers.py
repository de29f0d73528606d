#!/usr/bin/env python3
"""Fails on an include in the runtime that points up a layer.

The runtime's folders (runtime/include/gpipe/runtime/<layer>/ and
runtime/src/<layer>/) are layers; runtime/src/CMakeLists.txt declares each as
`gpipe_runtime_layer(<Name> USES <Lower>... SOURCES ...)`. A file of a layer
may include its own layer's headers and those of the layers it uses, directly
or through another; anything else is an include that points up (or sideways)
and fails the check, naming the file, the line and what its layer may use.
Sub-folders of a layer (backends/cpu, backends/host) may not include each
other. The C API's headers (gpipe_runtime.h, Runtime.hpp) belong to capi.

usage: check-runtime-layers.py ROOT [--pretend FILE=INCLUDE ...]
  --pretend adds an include to FILE (relative to ROOT) before checking: the
  ctest runtime-layering-catches-upward-include uses it to show that the
  check fails on one.
"""

import os
import re
import sys


def declared_layers(cmake_text):
    """{layer: set of layers it uses directly}, from gpipe_runtime_layer()."""
    layers = {}
    for call in re.finditer(r'gpipe_runtime_layer\(\s*(\w+)([^)]*)\)', cmake_text):
        name, args = call.group(1).lower(), call.group(2).split()
        uses, keyword = set(), None
        for word in args:
            if word in ('USES', 'SOURCES', 'LIBRARIES'):
                keyword = word
            elif keyword == 'USES':
                uses.add(word.lower())
        layers[name] = uses
    return layers


def closure(layers):
    """{layer: every layer it may include, itself among them}."""
    allowed = {}

    def below(layer):
        if layer not in allowed:
            allowed[layer] = {layer}
            for used in layers[layer]:
                allowed[layer] |= below(used)
        return allowed[layer]

    for layer in layers:
        below(layer)
    return allowed


def layer_of_path(path):
    """(layer, sub-folder or None) of a runtime file or include path."""
    for prefix in ('runtime/include/gpipe/runtime/', 'gpipe/runtime/',
                   'runtime/src/', ''):
        if path.startswith(prefix):
            rest = path[len(prefix):]
            break
    parts = rest.split('/')
    if len(parts) == 1:
        if parts[0] in ('gpipe_runtime.h', 'Runtime.hpp'):
            return 'capi', None
        return None, None
    sub = parts[1] if len(parts) > 2 else None
    return parts[0].lower(), sub


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    pretend = {}
    args = argv[2:]
    while args:
        if args[0] != '--pretend' or len(args) < 2 or '=' not in args[1]:
            print(__doc__, file=sys.stderr)
            return 2
        file, include = args[1].split('=', 1)
        pretend.setdefault(file, []).append(include)
        args = args[2:]

    with open(os.path.join(root, 'runtime/src/CMakeLists.txt')) as f:
        layers = declared_layers(f.read())
    if not layers:
        print('check-runtime-layers: no gpipe_runtime_layer() in '
              'runtime/src/CMakeLists.txt', file=sys.stderr)
        return 2
    allowed = closure(layers)

    problems, checked = [], 0
    for top in ('runtime/include/gpipe/runtime', 'runtime/src'):
        for directory, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                path = os.path.relpath(os.path.join(directory, name), root)
                if not name.endswith(('.h', '.hpp', '.cpp', '.def')):
                    continue
                layer, sub = layer_of_path(path)
                if layer is None:
                    problems.append(f'{path}: outside every layer folder')
                    continue
                if layer not in allowed:
                    problems.append(f'{path}: folder {layer}/ is not a layer of '
                                    'runtime/src/CMakeLists.txt')
                    continue
                checked += 1
                with open(os.path.join(root, path), errors='replace') as f:
                    lines = f.read().split('\n')
                lines += [f'#include "{inc}"' for inc in pretend.get(path, [])]
                for number, line in enumerate(lines, 1):
                    m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
                    if not m:
                        continue
                    target, target_sub = layer_of_path(m.group(1))
                    if target is None or (target not in allowed and
                                          not m.group(1).startswith('gpipe/runtime/')):
                        continue  # the file's own folder, or not the runtime's
                    if target not in allowed[layer]:
                        may = ', '.join(sorted(allowed[layer] - {layer})) or 'nothing'
                        problems.append(
                            f'{path}:{number}: includes "{m.group(1)}" of layer '
                            f'{target}/, above or beside {layer}/ (which may use '
                            f'{may}): an include that points up')
                    elif (target == layer and sub and target_sub and
                          sub != target_sub):
                        problems.append(
                            f'{path}:{number}: includes "{m.group(1)}": '
                            f'{layer}/{sub}/ and {layer}/{target_sub}/ are '
                            'siblings and may not include each other')
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f'check-runtime-layers: {len(problems)} problem(s)', file=sys.stderr)
        return 1
    print(f'check-runtime-layers: {checked} files, {len(layers)} layers, '
          'every include points down')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
