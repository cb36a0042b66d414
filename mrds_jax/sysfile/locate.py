"""Where a key of a TOML document sits: line numbers for error messages.

``tomllib`` gives line numbers only for syntax errors, so the schema's errors (a path of keys and array
indices such as ``("contact", 2, "P")``) are located here by reading the text once: table headers
(``[a.b]``, ``[[a.b]]``, counting the entries of arrays of tables), ``key = value`` lines (dotted keys too)
and the keys of one-line inline tables. A path not found exactly falls back to its longest located prefix.
"""
import re

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\.\"' ]+?)\s*=\s*(.*)$")
_INLINE_KEY = re.compile(r"([A-Za-z0-9_\-]+)\s*=")


def _split_key(key):
    return [part.strip().strip('"').strip("'") for part in key.split(".")]


def key_lines(text):
    """{path tuple: 1-based line} for every table header, array-of-tables entry and key in ``text``."""
    lines = {}
    counts = {}                 # array-of-tables path (with parent indices) -> entries so far
    table = ()
    for n, line in enumerate(text.splitlines(), start=1):
        m = _HEADER.match(line)
        if m:
            parts = _split_key(m.group(2))
            prefix = _resolve(parts[:-1], counts)
            if m.group(1) == "[[":
                base = prefix + (parts[-1],)
                index = counts.get(base, 0)
                counts[base] = index + 1
                table = base + (index,)
                lines.setdefault(base, n)
            else:
                table = prefix + (parts[-1],)
            lines[table] = n
            continue
        m = _KEY.match(line)
        if m and not line.lstrip().startswith("#"):
            path = table + tuple(_split_key(m.group(1)))
            lines.setdefault(path, n)
            value = m.group(2)
            if value.lstrip().startswith("{"):
                for k in _INLINE_KEY.findall(value):
                    lines.setdefault(path + (k,), n)
    return lines


def _resolve(parts, counts):
    """A header's parent path with the current index of each array of tables it passes through."""
    path = ()
    for part in parts:
        path += (part,)
        if path in counts:
            path += (counts[path] - 1,)
    return path


def locate(lines, path):
    """(line, located path) of ``path``, or of its longest located prefix; (None, ()) if none."""
    path = tuple(path)
    for k in range(len(path), 0, -1):
        if path[:k] in lines:
            return lines[path[:k]], path[:k]
    return None, ()
