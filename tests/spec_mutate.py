#!/usr/bin/env python3
"""spec_mutate.py OUT_DIR SPEC... - write mutated copies of spec files, for
tests/spec_diff.sh: two revisions of the loader must say exactly the same
about each of them.

Structural mutations (with PyYAML's node positions): every value replaced
by scalars, lists and mappings of the wrong kind, every key misspelled,
renamed or duplicated, every mapping entry and list item removed, every
list item duplicated. Then textual ones from a fixed seed: lines deleted,
duplicated, swapped, re-indented, characters deleted or inserted. The same
inputs give the same files, named NNNNN.yaml in OUT_DIR."""
import os
import random
import sys

import yaml

REPLACEMENTS = ['~', '"3072"', '0755', '1e3', '-5', '99999999999999999999', 'true', 'NO',
                'two words', '[a, b]', '[]', '{}', '{a: 1}', 'sm_90', 'nosuch', '1', '0']
KEY_NAMES = ['Bad-Name', 'when', 'arch']


def nodes(root):
    """(node, role, parent, index) for every node below root."""
    out = []

    def walk(n):
        if isinstance(n, yaml.MappingNode):
            for i, (k, v) in enumerate(n.value):
                out.append((k, 'key', n, i))
                out.append((v, 'value', n, i))
                walk(v)
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                out.append((v, 'item', n, i))
                walk(v)
    walk(root)
    return out


def line_starts(text):
    starts = [0]
    for i, ch in enumerate(text):
        if ch == '\n':
            starts.append(i + 1)
    return starts


def block_end(lines, first, indent):
    """Index of the first line after `first` that is not inside a block
    starting at column `indent` on line `first`."""
    j = first + 1
    while j < len(lines):
        s = lines[j]
        body = s.lstrip(' ')
        if body.strip() and not body.startswith('#') and len(s) - len(body) <= indent:
            break
        j += 1
    return j


def structural(text):
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return
    if root is None:
        return
    lines = text.splitlines(keepends=True)
    starts = line_starts(text)
    for n, role, parent, i in nodes(root):
        a, b = n.start_mark.index, n.end_mark.index
        if role == 'key':
            key = n.value
            cands = [key + 'x', key[:-1] if len(key) > 2 else None] + KEY_NAMES
            if i > 0:
                cands.append(parent.value[i - 1][0].value)
            for c in cands:
                if c and c != key:
                    yield text[:a] + c + text[b:]
            # the whole entry removed
            v = parent.value[i][1]
            if parent.flow_style:
                if i + 1 < len(parent.value):
                    end = parent.value[i + 1][0].start_mark.index
                else:
                    end = v.end_mark.index
                yield text[:a] + text[end:]
            else:
                ln, col = n.start_mark.line, n.start_mark.column
                if lines[ln][:col].strip() == '':
                    end = block_end(lines, ln, col)
                    yield ''.join(lines[:ln] + lines[end:])
            continue
        if role == 'item':
            if parent.flow_style:
                if i + 1 < len(parent.value):
                    end = parent.value[i + 1].start_mark.index
                else:
                    end = b
                yield text[:a] + text[end:]
                yield text[:a] + text[a:b] + ', ' + text[a:]
            else:
                ln = n.start_mark.line
                pre = lines[ln][:n.start_mark.column]
                if pre.strip() == '-':
                    dash = pre.index('-')
                    end = block_end(lines, ln, dash)
                    yield ''.join(lines[:ln] + lines[end:])
                    yield ''.join(lines[:end] + lines[ln:end] + lines[end:])
        # the value or item replaced
        if isinstance(n, yaml.ScalarNode) or n.flow_style:
            for r in REPLACEMENTS:
                yield text[:a] + r + text[b:]
        else:
            ln = n.start_mark.line
            pre = lines[ln][:n.start_mark.column]
            if role == 'value':
                # "key:\n  block" -> "key: R"
                kl = parent.value[i][0].start_mark.line
                if kl < ln and pre.strip() in ('', '-'):
                    end = block_end(lines, kl, len(lines[kl]) - len(lines[kl].lstrip(' ')))
                    head = lines[kl].rstrip('\n')
                    for r in REPLACEMENTS:
                        yield ''.join(lines[:kl] + [head + ' ' + r + '\n'] + lines[end:])
    del starts


def textual(text, rng, count):
    for _ in range(count):
        lines = text.splitlines(keepends=True)
        if not lines:
            return
        op = rng.randrange(7)
        i = rng.randrange(len(lines))
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[i])
        elif op == 2 and i + 1 < len(lines):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        elif op == 3:
            lines[i] = '  ' + lines[i]
        elif op == 4:
            lines[i] = lines[i][2:] if lines[i].startswith('  ') else lines[i]
        elif op == 5 and len(lines[i]) > 1:
            j = rng.randrange(len(lines[i]) - 1)
            lines[i] = lines[i][:j] + lines[i][j + 1:]
        else:
            j = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:j] + rng.choice(":-[]{},#'\"&*!|>% \t0aZ_\\") + lines[i][j:]
        yield ''.join(lines)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seen = set()
    k = 0
    for path in sys.argv[2:]:
        with open(path, encoding='utf-8') as f:
            text = f.read()
        rng = random.Random(path.encode().hex())
        for m in list(structural(text)) + list(textual(text, rng, 300)):
            if m in seen or m == text:
                continue
            seen.add(m)
            with open(os.path.join(out, '%05d.yaml' % k), 'w', encoding='utf-8') as f:
                f.write(m)
            k += 1
    print(k)


if __name__ == '__main__':
    main()
