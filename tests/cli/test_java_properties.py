"""``--config`` files read as ``java.util.Properties.load`` reads them (storage_core/tools/
java_properties.py): Kafka loads a broker's ``server.properties`` that way (``Utils.loadProps``),
and the docs say the same file works here. Pinned cases from Java's rules, then Java itself as the
oracle: the same texts (a corpus of the tricky shapes and generated ones) loaded by
``Properties.load`` in a JVM (Java's single-file source launcher; skipped where the JDK's compiler
module is absent, a JRE) must give the same keys and values, and fail on the same inputs."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from storage_core.tools.java_properties import PropertiesSyntaxError, load_properties

PINNED = [
    ("a=b", {"a": "b"}),
    ("a = b ", {"a": "b "}),                          # trailing whitespace of a value is kept
    ("a:b\na b\n", {"a": "b"}),                       # ':' and whitespace separate too; later wins
    ("a\n", {"a": ""}),                               # no separator: an empty value
    ("  # comment\n! also\n\n  k=v", {"k": "v"}),
    ("a=b\\\n    c\\\n  d", {"a": "bcd"}),            # continuations drop the leading whitespace
    ("a=b\\\\\nc=d", {"a": "b\\", "c": "d"}),         # an even run of backslashes continues nothing
    ("a=b\\", {"a": "b"}),                            # a backslash ending the file is dropped
    ("\\", {"": ""}),                                  # ... and a line of it is the key ""
    ("\\\n#c", {}),                                    # unless a comment follows
    ("\\\r\n", {}),                                     # or it ends with \r\n (Java's LineReader)
    ("a=b\\\n# not a comment", {"a": "b# not a comment"}),
    ("\\\n# a comment after all\nk=v", {"k": "v"}),   # a continuation holding nothing is a fresh line
    ("a\\=b=c", {"a=b": "c"}),                        # escaped separators belong to the key
    ("a\\ b c", {"a b": "c"}),
    ("k=\\t\\n\\r\\f\\x\\\\", {"k": "\t\n\r\fx\\"}),
    ("k=\\u0041\\u00e9", {"k": "Aé"}),
    ("k=\\ud83d\\ude00", {"k": "\U0001F600"}),        # a surrogate pair is one character
    ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
    ("k==v", {"k": "=v"}),                            # one separator is skipped, not two
    ("k = : v", {"k": ": v"}),
    ("\f\tk\f=\tv", {"k": "v"}),
]


@pytest.mark.parametrize("text,expected", PINNED)
def test_pinned_cases(text: str, expected: dict[str, str]) -> None:
    assert load_properties(text) == expected


@pytest.mark.parametrize("text,line", [("k=\\u12g4", 1), ("a=1\nk=x\\u00", 2), ("a=1\\\n\\uZZZZ", 1)])
def test_a_malformed_unicode_escape_fails_naming_the_line(text: str, line: int) -> None:
    with pytest.raises(PropertiesSyntaxError) as e:
        load_properties(text)
    assert e.value.line == line and "Malformed \\uxxxx encoding." in str(e.value)


JAVA = r"""
import java.io.*;
import java.nio.file.*;
import java.util.*;

public class LoadEach {
    static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.toString();
    }
    public static void main(String[] args) throws Exception {
        for (String name : args) {
            Properties p = new Properties();
            StringBuilder out = new StringBuilder();
            try (InputStream in = Files.newInputStream(Paths.get(name))) {
                p.load(in);
                TreeMap<String, String> sorted = new TreeMap<>();
                for (String k : p.stringPropertyNames()) sorted.put(k, p.getProperty(k));
                for (Map.Entry<String, String> e : sorted.entrySet())
                    out.append(hex(e.getKey())).append(':').append(hex(e.getValue())).append(' ');
                System.out.println("OK " + out);
            } catch (IllegalArgumentException e) {
                System.out.println("ERROR " + e.getMessage());
            }
        }
    }
}
"""

TRICKY = [text for text, _ in PINNED] + [
    "a\\\n\n b", "a\\\n   \nb=c", "\\\\\n", "=v", ":v", " =v", "k\\", "k\\\\\\\nv", "#c\\\nk=v",
    "k=\\u004", "k=\\u", "a\\\r\n  b", "\\u0061=b", "a\\:b c:d", "\\\n\\\n\\\nk", "k\t\t=\t\tv\t",
]

ALPHABET = list("ab=: \t\f\\\n\r#!u0f")


def _unhex(s: str) -> str:
    """Java's UTF-16 code units, as hex, back to a string (a surrogate pair is one character)."""
    return bytes.fromhex(s).decode("utf-16-be", "surrogatepass")


def _java_can_compile() -> str | None:
    java = shutil.which("java")
    if java is None:
        return "no 'java' on PATH"
    modules = subprocess.run([java, "--list-modules"], capture_output=True, text=True, timeout=120).stdout
    if "jdk.compiler" not in modules:
        return "this Java is a JRE (no jdk.compiler): the single-file source launcher needs a JDK"
    return None


def test_same_as_java_properties_load(tmp_path: Path) -> None:
    """Every text of the corpus and 400 generated ones (random strings over the characters the
    syntax gives meaning to, fixed seed), loaded by Java's ``Properties.load`` and by
    ``load_properties``: the same key/value pairs, or both refuse the text."""
    reason = _java_can_compile()
    if reason:
        pytest.skip(reason)
    rng = random.Random(20261128)
    texts = TRICKY + ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40))) for _ in range(400)]
    files = []
    for i, text in enumerate(texts):
        path = tmp_path / f"{i}.properties"
        path.write_bytes(text.encode("ascii"))          # ISO-8859-1, as Kafka's InputStream load
        files.append(str(path))
    source = tmp_path / "LoadEach.java"
    source.write_text(JAVA)
    run = subprocess.run(["java", str(source), *files], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    answers = run.stdout.splitlines()
    assert len(answers) == len(texts)
    for text, answer in zip(texts, answers):
        kind, _, rest = answer.partition(" ")
        try:
            ours: dict[str, str] | None = load_properties(text)
        except PropertiesSyntaxError:
            ours = None
        if kind == "ERROR":
            assert ours is None, (text, ours)
            continue
        java = dict((_unhex(k), _unhex(v)) for k, _, v in (pair.partition(":") for pair in rest.split()))
        assert ours == java, repr(text)
