"""``java.util.Properties.load``'s syntax, for ``--config`` files: a broker's
``server.properties`` reads here as Kafka reads it (``Utils.loadProps``).

Java's rules, as its ``LineReader`` and ``loadConvert`` apply them:

- natural lines end at ``\\n``, ``\\r`` or ``\\r\\n``; leading spaces, tabs and form feeds are
  skipped; a blank line is nothing; a line whose first other character is ``#`` or ``!`` is a
  comment (a comment is never continued);
- a line ending in an odd number of backslashes continues on the next natural line, whose
  leading whitespace is skipped (a backslash ending the file is dropped);
- the key ends at the first unescaped ``=``, ``:``, space, tab or form feed; whitespace after it,
  then one ``=`` or ``:``, then whitespace, are skipped; the rest is the value (trailing
  whitespace kept);
- escapes in keys and values: ``\\t`` ``\\n`` ``\\r`` ``\\f``, ``\\uXXXX``, any other ``\\c`` is
  ``c``; a malformed ``\\u`` fails (Java: ``Malformed \\uxxxx encoding.``);
- a later key replaces an earlier one.

One difference: the text is decoded by the caller (``--config`` as strict UTF-8, where Java's
``load(InputStream)`` reads ISO-8859-1); the two agree on ASCII, which a ``server.properties`` is.
"""

from __future__ import annotations

import re

_LINE_END = re.compile(r"\r\n|\r|\n")
_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


class PropertiesSyntaxError(ValueError):
    """A malformed ``\\uXXXX`` escape; ``line`` is the 1-based natural line where the logical
    line holding it starts."""

    def __init__(self, reason: str, line: int) -> None:
        super().__init__(f"line {line}: {reason}")
        self.reason, self.line = reason, line


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """``LineReader.readLine``: ``(first natural line number, logical line)``, comments and
    blank lines left out, continuations joined (the backslash and the continuation's leading
    whitespace removed). A continuation that holds nothing yet (a line of one backslash) is a
    fresh line to Java: a comment or blank line after it is one."""
    naturals = _LINE_END.split(text)
    if naturals and naturals[-1] == "":
        naturals.pop()                          # the final line break opens no line
    out: list[tuple[int, str]] = []
    acc = ""                                    # the logical line so far
    continued = False                           # the last natural line asked for a continuation
    start = 0
    for number, raw in enumerate(naturals, 1):
        line = raw.lstrip(_WHITESPACE)
        if not acc:
            if not line or line[0] in "#!":
                continued = False
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:                        # continued: drop the escaping backslash
            acc += line[:-1]
            continued = True
            continue
        out.append((start, acc + line))
        acc, continued = "", False
    if continued and (acc or not text.endswith("\r\n")):
        # the file ended right after a continuation's backslash: Java's LineReader returns the
        # line, even an empty one (a file of one backslash holds the key ""), except that an
        # empty one ended by \r\n is not (it reads the \n before it sees the end)
        out.append((start, acc))
    return out


def _unescape(s: str, line: int) -> str:
    """``Properties.loadConvert``."""
    if "\\" not in s:
        return s
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i == n:                              # a lone backslash at the end: Java keeps nothing
            break
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i:i + 4]
            if len(digits) < 4 or not set(digits) <= _HEX:
                raise PropertiesSyntaxError("Malformed \\uxxxx encoding.", line)
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    text = "".join(out)
    # \uXXXX escapes are UTF-16 code units: a pair of surrogates is one character, as in Java
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def _split(line: str) -> tuple[str, str]:
    """``Properties.load0``: the raw key and raw value of a logical line."""
    n = len(line)
    key_len = 0
    has_sep = False
    preceding_backslash = False
    while key_len < n:
        c = line[key_len]
        if c in "=:" and not preceding_backslash:
            value_start = key_len + 1
            has_sep = True
            break
        if c in _WHITESPACE and not preceding_backslash:
            value_start = key_len + 1
            break
        preceding_backslash = (c == "\\") and not preceding_backslash
        key_len += 1
    else:
        value_start = n
    while value_start < n:
        c = line[value_start]
        if c not in _WHITESPACE:
            if not has_sep and c in "=:":
                has_sep = True
            else:
                break
        value_start += 1
    return line[:key_len], line[value_start:]


def load_properties(text: str) -> dict[str, str]:
    """The key/value pairs of a properties file's ``text``, as ``Properties.load`` reads them;
    ``PropertiesSyntaxError`` for a malformed ``\\uXXXX`` escape."""
    props: dict[str, str] = {}
    for line_no, line in _logical_lines(text):
        key, value = _split(line)
        props[_unescape(key, line_no)] = _unescape(value, line_no)
    return props
